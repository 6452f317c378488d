// Load generator for the c10d rendezvous: N simulated agents (one thread
// each, running our real C10dRendezvous) join one job and wait for their
// assignments. Prints the wall time from the first connect to the last
// assignment, and checks that the group ranks are 0..N-1 exactly once.
//
//   rdzv_load --port P [--host 127.0.0.1] --nodes 1000 [--nproc 8]
//       each agent speaks the TCPStore protocol to the store at host:P
//       (cxxrun-rdzv), with a connection of its own;
//   rdzv_load --etcd h1:p1,h2:p2,h3:p3 --nodes 1000 [--nproc 8]
//       each agent meets the others through etcd as --rdzv-backend=etcd-v3
//       does (EtcdJobStore: its own connections and a lease, its alive key
//       on it); the job's keys are removed at the end.
//   --recover 1: then one member publishes a failure (the `abort` event),
//       every agent WAITs for the round's event as its watcher would, and
//       re-forms the job as C10dBackend::rejoin does (the event, the waiting
//       count, who stepped out, the next round, a join expecting N). Adds
//       the time from the failure to the last agent woken and to the last
//       agent holding its next-round assignment.
#include <sys/resource.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "rendezvous/c10d_rendezvous.h"
#include "rendezvous/etcd_job_store.h"
#include "store/client.h"

using namespace cxxrun::rendezvous;
using namespace cxxrun::store;
using Clock = std::chrono::steady_clock;

namespace {

struct Args {
  std::string host = "127.0.0.1";
  int port = 0;
  std::vector<std::string> etcd;  // members; empty: the TCPStore at host:port
  int nodes = 1000;
  int nproc = 8;
  bool recover = false;
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

bool parse(int argc, char** argv, Args& a) {
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--host")) a.host = argv[i + 1];
    else if (!strcmp(argv[i], "--port")) a.port = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--etcd")) a.etcd = split(argv[i + 1]);
    else if (!strcmp(argv[i], "--nodes")) a.nodes = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--nproc")) a.nproc = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--recover")) a.recover = !strcmp(argv[i + 1], "1");
    else {
      fprintf(stderr, "rdzv_load: unknown argument %s\n", argv[i]);
      return false;
    }
  }
  if ((a.port <= 0 && a.etcd.empty()) || a.nodes <= 0) {
    fprintf(stderr, "rdzv_load: --port P or --etcd MEMBERS, and --nodes N > 0, are required\n");
    return false;
  }
  return true;
}

RendezvousSettings settings_for(const Args& a, const std::string& run_id, int node) {
  RendezvousSettings s;
  s.run_id = run_id;
  s.endpoint = a.etcd.empty() ? a.host + ":" + std::to_string(a.port) : a.etcd.front();
  s.min_nodes = s.max_nodes = a.nodes;
  s.local_world_size = a.nproc;
  s.entrypoint = "rdzv_load";
  s.local_addr = "10.0." + std::to_string(node / 250) + "." + std::to_string(node % 250 + 1);  // just a label
  s.join_timeout = std::chrono::seconds(60);
  s.read_timeout = std::chrono::seconds(60);
  if (!a.etcd.empty()) s.etcd.endpoints = cxxrun::etcd::parse_endpoints(a.etcd, cxxrun::etcd::Protocol::http);
  return s;
}

// What every agent shares while it recovers: when all hold round 0, when the
// failure was published, when the last was woken and re-assigned.
struct Recovery {
  std::mutex mu;
  std::condition_variable all_in;
  int in_round0 = 0;
  Clock::time_point failed{}, last_woken{}, last_done{};
};

// C10dBackend::rejoin after an `abort`, less what only the agent does.
Assignment recover(const Args& a, int node, C10dRendezvous& rdzv, StoreClient& store, Recovery& r) {
  {
    std::unique_lock l(r.mu);
    if (++r.in_round0 == a.nodes) r.all_in.notify_all();
    if (!r.all_in.wait_for(l, std::chrono::seconds(120), [&] { return r.in_round0 == a.nodes; }))
      throw std::runtime_error("not every agent finished round 0 within 120 s");
  }
  if (node == 0) {
    std::lock_guard l(r.mu);
    r.failed = Clock::now();
    rdzv.publish_failure("{\"rank\": 0, \"exitcode\": 1}");
  }
  store.wait({rdzv.event_key()}, std::chrono::seconds(60));
  {
    std::lock_guard l(r.mu);
    r.last_woken = std::max(r.last_woken, Clock::now());
  }
  const int expected = std::max(1, rdzv.members() + rdzv.num_nodes_waiting() -
                                       (rdzv.current_event() == RoundEvent::dead ? 1 : 0));
  (void)rdzv.stepped_out();
  rdzv.start_next_round();
  Assignment next = rdzv.next_rendezvous(expected);
  std::lock_guard l(r.mu);
  r.last_done = std::max(r.last_done, Clock::now());
  return next;
}

// One simulated agent's rendezvous: its store, then the first round (and,
// with --recover, the next).
Assignment one_agent(const Args& a, int node, const RendezvousSettings& s, std::unique_ptr<EtcdJobStore>& etcd,
                     Recovery& r) {
  auto pick = [](const std::vector<std::string>&) { return 29500; };
  auto quiet = [](const std::string&) {};
  if (a.etcd.empty()) {
    StoreClient::Options options;
    options.host = a.host;
    options.port = a.port;
    options.timeout = std::chrono::seconds(60);
    auto client = StoreClient::connect(options);
    C10dRendezvous rdzv(*client, s, pick, quiet);
    Assignment first = rdzv.next_rendezvous();
    return a.recover ? recover(a, node, rdzv, *client, r) : first;
  }
  etcd = std::make_unique<EtcdJobStore>(s);
  C10dRendezvous rdzv(etcd->client(), s, pick, quiet);
  rdzv.use_liveness(*etcd->liveness());
  Assignment first = rdzv.next_rendezvous();
  return a.recover ? recover(a, node, rdzv, etcd->client(), r) : first;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse(argc, argv, args)) return 2;
  spdlog::set_level(spdlog::level::warn);  // not a line per simulated agent
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  const std::string run_id = "load" + std::to_string(getpid());
  std::vector<int> rank_count(args.nodes, 0);
  std::vector<std::unique_ptr<EtcdJobStore>> etcd(args.nodes);
  std::mutex mu;
  std::atomic<int> failures{0};
  Recovery recovery;
  const auto start = Clock::now();
  std::vector<std::thread> threads;
  threads.reserve(args.nodes);
  for (int i = 0; i < args.nodes; ++i) {
    threads.emplace_back([&, i] {
      try {
        Assignment a = one_agent(args, i, settings_for(args, run_id, i), etcd[i], recovery);
        std::lock_guard l(mu);
        if (a.group_rank >= 0 && a.group_rank < args.nodes) ++rank_count[a.group_rank];
        if (a.world_size != args.nodes * args.nproc) ++failures;
      } catch (const std::exception& e) {
        if (failures++ == 0) fprintf(stderr, "rdzv_load: node %d: %s\n", i, e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  for (int c : rank_count)
    if (c != 1) ++failures;
  // Not timed: every agent leaves, as the last member of a finished job
  // would, so etcd keeps no keys or leases of the run.
  threads.clear();
  for (auto& store : etcd)
    if (store) threads.emplace_back([&store, n = args.nodes] { store->leave(true, n, {}); });
  for (auto& t : threads) t.join();
  printf("{\"store\": \"%s\", \"nodes\": %d, \"seconds\": %.3f, \"failures\": %d",
         args.etcd.empty() ? "tcpstore" : "etcd", args.nodes, secs, failures.load());
  if (args.recover) {
    auto span = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); };
    printf(", \"recovery_s\": %.3f, \"abort_push_s\": %.3f, \"rejoin_assign_s\": %.3f",
           span(recovery.failed, recovery.last_done), span(recovery.failed, recovery.last_woken),
           span(recovery.last_woken, recovery.last_done));
  }
  printf("}\n");
  return failures == 0 ? 0 : 1;
}
