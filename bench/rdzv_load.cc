// Load generator for the c10d rendezvous: N simulated agents (one thread and
// one store connection each, speaking the TCPStore protocol) join one job at
// a store server and wait for their assignments. Prints the wall time from
// the first connect to the last assignment, and checks that the group ranks
// are 0..N-1 exactly once.
//
//   rdzv_load --host 127.0.0.1 --port P --nodes 1000 [--nproc 8]
#include <sys/resource.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/c10d_rendezvous.h"
#include "store/client.h"

using namespace cxxrun::rendezvous;
using namespace cxxrun::store;
using Clock = std::chrono::steady_clock;

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0, nodes = 1000, nproc = 8;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--host")) host = argv[i + 1];
    else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--nodes")) nodes = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--nproc")) nproc = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "rdzv_load: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (port <= 0 || nodes <= 0) {
    fprintf(stderr, "rdzv_load: --port P and --nodes N > 0 are required\n");
    return 2;
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  const std::string run_id = "load" + std::to_string(getpid());
  std::vector<int> rank_count(nodes, 0);
  std::mutex mu;
  std::atomic<int> failures{0};
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  threads.reserve(nodes);
  for (int i = 0; i < nodes; ++i) {
    threads.emplace_back([&, i] {
      try {
        StoreClient::Options options;
        options.host = host;
        options.port = port;
        options.timeout = std::chrono::seconds(60);
        auto client = StoreClient::connect(options);
        RendezvousSettings s;
        s.run_id = run_id;
        s.endpoint = host + ":" + std::to_string(port);
        s.min_nodes = s.max_nodes = nodes;
        s.local_world_size = nproc;
        s.entrypoint = "rdzv_load";
        s.local_addr = "10.0." + std::to_string(i / 250) + "." + std::to_string(i % 250 + 1);  // just a label
        s.join_timeout = std::chrono::seconds(60);
        C10dRendezvous rdzv(*client, s, [](const std::vector<std::string>&) { return 29500; }, [](const std::string&) {});
        Assignment a = rdzv.next_rendezvous();
        std::lock_guard l(mu);
        if (a.group_rank >= 0 && a.group_rank < nodes) ++rank_count[a.group_rank];
        if (a.world_size != nodes * nproc) ++failures;
      } catch (const std::exception& e) {
        if (failures++ == 0) fprintf(stderr, "rdzv_load: node %d: %s\n", i, e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  for (int c : rank_count)
    if (c != 1) ++failures;
  printf("{\"nodes\": %d, \"seconds\": %.3f, \"failures\": %d}\n", nodes, secs, failures.load());
  return failures == 0 ? 0 : 1;
}
