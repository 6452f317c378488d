// cxxrun-rdzv: a standalone TCPStore server, for a rendezvous endpoint that
// should outlive any one agent. Usage errors (an unreadable or empty token
// file included) exit 2 with one line; a port that cannot be bound exits 1
// with one line; SIGINT/SIGTERM exit 0.
#include <sys/resource.h>

#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "store/auth.h"
#include "store/server.h"
#include "store/wire.h"

namespace {

void setup_logging() {
  auto logger = spdlog::stderr_color_mt("cxxrun-rdzv");
  logger->set_pattern("[%H:%M:%S.%e] [%n] %l: %v");
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

// Each client is a socket; the usual soft limit of 1024 would cap a store
// meant for thousands of agents and workers well below what the host allows.
void raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("A TCPStore-compatible key-value server for torch and cxxrun rendezvous.",
               "cxxrun-rdzv");
  int port = -1;
  // Loopback unless asked: a store anyone on the network can write to is a
  // choice to make, not a default.
  std::string host = "127.0.0.1";
  size_t memory_limit_mib = cxxrun::store::wire::kDefaultMemoryLimit >> 20;
  size_t max_value_bytes = cxxrun::store::wire::kMaxValueBytes;
  app.add_option("--port", port, "port to listen on; 0 picks a free one")
      ->required()
      ->check(CLI::Range(0, 65535));
  app.add_option("--host", host,
                 "address or name to listen on (default: 127.0.0.1; 0.0.0.0 or :: for every interface)");
  app.add_option("--memory-limit", memory_limit_mib,
                 "MiB that all connections together may hold in unfinished requests and unsent replies; "
                 "past it the connection holding the most is closed (default 256)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24));
  app.add_option("--max-value-bytes", max_value_bytes,
                 "longest value a request may carry, in bytes (default 8388608, torch's limit)")
      ->check(CLI::Range(size_t{1}, cxxrun::store::wire::kMaxRequestBytes));
  std::string token_file;
  app.add_option("--token-file", token_file,
                 "a file holding a shared secret that every client must prove it knows before any request "
                 "(agents: --rdzv-conf token_file=PATH); torch's own clients cannot, and are refused");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "cxxrun-rdzv: error: " << e.what() << std::endl;
    return 2;
  }
  std::string token;
  if (!token_file.empty()) {
    try {
      token = cxxrun::store::auth::read_token_file(token_file);
    } catch (const std::exception& e) {
      std::cerr << "cxxrun-rdzv: error: --token-file: " << e.what() << std::endl;
      return 2;
    }
  }

  try {
    setup_logging();
    raise_fd_limit();
    // Blocked before the server thread starts, so that thread inherits the
    // mask and the signals are left for sigwait below.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    cxxrun::store::StoreServerOptions options;
    options.host = host;
    options.port = port;
    options.memory_limit = memory_limit_mib << 20;
    options.max_value_bytes = max_value_bytes;
    options.token = token;
    cxxrun::store::BackgroundStoreServer server(options);
    spdlog::info("listening on {}", server.address());
    if (!token.empty())
      spdlog::info("every client must prove it knows the token in {}", token_file);
    else if (!server.loopback_only())
      spdlog::warn("no token on a store that listens beyond loopback: anyone who can reach {} can read and "
                   "change it (--token-file PATH sets a shared secret)",
                   server.address());
    // No deadline on purpose: serving until told to stop is the whole job.
    int received = 0;
    sigwait(&stop_signals, &received);
    spdlog::info("received {}, stopping", received == SIGINT ? "SIGINT" : "SIGTERM");
    server.stop();
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "cxxrun-rdzv: " << e.what() << std::endl;
    return 1;
  }
}
