// Runs the file-timer watchdog server for a while and prints what expires,
// so that tests can drive it with torch's own FileTimerClient.
//
//   file_timer_probe SECONDS [FIFO_PATH]
//
// stdout: "path <fifo>" once the FIFO accepts clients, then one line
// "expired <pid> <signal> <scope_id>" per expiry, then "done". Nothing is
// killed: the probe only reports.
#include <poll.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include "agent/hang/file_timer.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: file_timer_probe SECONDS [FIFO_PATH]\n");
    return 2;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::atof(argv[1]));
  try {
    cxxrun::agent::FileTimerServer server(argc == 3 ? argv[2] : "");
    std::printf("path %s\n", server.path().c_str());
    std::fflush(stdout);
    // torch's agent polls every 0.1 s too.
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{server.fd(), POLLIN, 0};
      if (poll(&p, 1, 100) > 0) server.on_readable();
      for (const auto& e : server.expired())
        std::printf("expired %d %d %s\n", static_cast<int>(e.pid), e.signal, e.scope_id.c_str());
      std::fflush(stdout);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "file_timer_probe: %s\n", e.what());
    return 1;
  }
  std::printf("done\n");
  return 0;
}
