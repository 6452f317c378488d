// Store throughput: C clients (one thread and connection each) run a 50/50
// set/get mix on their own keys against a TCPStore-compatible server for a
// fixed time, in torch 1.13's legacy protocol so the same client can drive
// both our server and torch's. Prints operations per second.
//
//   store_load --port P [--host H] [--clients 64] [--seconds 3] [--value-bytes 64]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/store.h"

using namespace cxxrun::rendezvous;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0, clients = 64, value_bytes = 64;
  double seconds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--host")) host = argv[i + 1];
    else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--clients")) clients = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--value-bytes")) value_bytes = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "store_load: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (port <= 0 || clients <= 0 || seconds <= 0) {
    fprintf(stderr, "store_load: --port P is required; --clients and --seconds must be positive\n");
    return 2;
  }
  std::atomic<long long> ops{0};
  std::atomic<int> failures{0};
  std::atomic<bool> go{false}, stop{false};
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      try {
        StoreClient::Options o;
        o.host = host;
        o.port = port;
        o.protocol = Protocol::legacy;
        o.timeout = std::chrono::seconds(30);
        auto client = StoreClient::connect(o);
        const std::string value(value_bytes, 'v');
        const std::string key = "bench/" + std::to_string(c) + "/";
        while (!go) std::this_thread::yield();
        long long n = 0;
        for (; !stop; ++n) {
          const std::string k = key + std::to_string(n / 2 % 16);
          if (n % 2 == 0)
            client->set(k, value);
          else if (client->get(k).size() != value.size())
            ++failures;
        }
        ops += n;
      } catch (const std::exception& e) {
        if (failures++ == 0) fprintf(stderr, "store_load: client %d: %s\n", c, e.what());
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(200));  // let every client connect
  const auto start = Clock::now();
  go = true;
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  stop = true;
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  printf("{\"clients\": %d, \"ops\": %lld, \"seconds\": %.3f, \"ops_per_second\": %.0f, \"failures\": %d}\n", clients,
         ops.load(), secs, ops / secs, failures.load());
  return failures == 0 ? 0 : 1;
}
