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
//       every agent reads the round's event as its watcher would (a GET
//       that waits for it), and re-forms the job as C10dBackend::rejoin does
//       (the waiting count, who stepped out, the next round, a join
//       expecting N). Adds
//       the time from the failure to the last agent woken and to the last
//       agent holding its next-round assignment.
//   --procs K: the agents are spread over K processes (forked first), each
//       with its own descriptor limit: over etcd an agent holds about three
//       connections, so 10,000 agents need more than one process may open
//       here. --timeout S: each agent's join and read timeout (60 s).
//   --spread 1: agent i lists the etcd members from the (i mod M)-th on (as
//       a launch script may give each node its own order), so each member
//       holds a third of the connections: the first member alone cannot
//       hold 10,000 agents' within one process's descriptor limit here.
//   --keep-alive S: the agents' keep_alive_interval (1 s by default); a
//       site with 10,000 nodes on etcd renews their leases less often.
//   RDZV_LOAD_LOG=debug (or info, ...): the agents' log lines, on stdout;
//       only warnings without it.
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <atomic>
#include <condition_variable>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "args.h"
#include "procs.h"
#include "rendezvous/c10d_rendezvous.h"
#include "rendezvous/etcd_endpoints.h"
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
  int procs = 1;
  int timeout_s = 60;
  bool spread = false;    // agent i lists the members from the (i mod M)-th on
  int keep_alive_ms = 0;  // 0: the agent's default interval
};

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

bool parse(int argc, char** argv, Args& a) {
  using bench_args::arg;
  if (!bench_args::parse(
          "rdzv_load", argc, argv,
          {arg("--host", a.host), arg("--port", a.port),
           {"--etcd", [&a](const char* v) { a.etcd = split(v); }}, arg("--nodes", a.nodes), arg("--nproc", a.nproc),
           arg("--recover", a.recover), arg("--procs", a.procs), arg("--timeout", a.timeout_s),
           arg("--spread", a.spread),
           {"--keep-alive", [&a](const char* v) { a.keep_alive_ms = static_cast<int>(atof(v) * 1000); }}}))
    return false;
  if ((a.port <= 0 && a.etcd.empty()) || a.nodes <= 0 || a.procs <= 0 || a.procs > a.nodes || a.timeout_s <= 0 ||
      a.keep_alive_ms < 0) {
    fprintf(stderr, "rdzv_load: --port P or --etcd MEMBERS, --nodes N > 0, 1 <= --procs <= N, --timeout S > 0 "
                    "and --keep-alive S >= 0\n");
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
  s.join_timeout = std::chrono::seconds(a.timeout_s);
  s.read_timeout = std::chrono::seconds(a.timeout_s);
  if (a.keep_alive_ms > 0) s.keep_alive_interval = std::chrono::milliseconds(a.keep_alive_ms);
  if (!a.etcd.empty()) {
    std::vector<std::string> members = a.etcd;
    if (a.spread) std::rotate(members.begin(), members.begin() + node % members.size(), members.end());
    s.etcd.endpoints = cxxrun::rendezvous::parse_etcd_endpoints(members, false);
  }
  return s;
}

// What every agent shares, in memory shared by every process: how many hold
// round 0, when the failure was published, when the last agent was woken
// and re-assigned (steady-clock nanoseconds: one clock for every process),
// and each group rank's count. Waits on it poll, one thread per process.
struct Shared {
  std::atomic<int> in_round0{0};
  std::atomic<int> failures{0};
  std::atomic<int64_t> failed{0}, last_woken{0}, last_done{0};
  std::atomic<int64_t> assigned{0};  // when the last process's agents all held their assignments
  // `nodes` counters follow this struct in the mapping, one per group rank.
  std::atomic<int>* rank_count() { return reinterpret_cast<std::atomic<int>*>(this + 1); }

  static Shared* create(int nodes) {
    const size_t bytes = sizeof(Shared) + sizeof(std::atomic<int>) * static_cast<size_t>(nodes);
    void* m = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) return nullptr;
    auto* sh = new (m) Shared();
    for (int r = 0; r < nodes; ++r) new (sh->rank_count() + r) std::atomic<int>(0);
    return sh;
  }
};

int64_t now_ns() { return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count(); }

void at_least(std::atomic<int64_t>& v, int64_t t) {
  for (int64_t seen = v.load(); seen < t && !v.compare_exchange_weak(seen, t);) {
  }
}

// This process's agents wait here until every agent of every process holds
// round 0: one poller per process, the others on a condition variable. Each
// renews its lease every keep-alive interval while it waits, as an agent
// does while its workers run: a lease left to lapse here deleted every
// alive key of round 0 during the recovery, N DELETEs to each of N watches.
struct Round0Barrier {
  std::mutex mu;
  std::condition_variable cv;
  bool open = false;
  bool polling = false;

  void arrive_and_wait(Shared& sh, int nodes, const std::function<void()>& beat, std::chrono::milliseconds every) {
    ++sh.in_round0;
    std::unique_lock l(mu);
    if (!polling) {
      polling = true;
      l.unlock();
      const auto until = Clock::now() + std::chrono::seconds(600);
      for (auto next_beat = Clock::now() + every; sh.in_round0.load() < nodes && Clock::now() < until;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
        if (beat && Clock::now() >= next_beat) {
          beat();
          next_beat = Clock::now() + every;
        }
      }
      l.lock();
      open = true;
      cv.notify_all();
    }
    while (!cv.wait_for(l, every, [&] { return open; })) {
      if (!beat) continue;
      l.unlock();
      beat();
      l.lock();
    }
    if (sh.in_round0.load() < nodes) throw std::runtime_error("not every agent finished round 0 within 600 s");
  }
};

// C10dBackend::rejoin after an `abort`, less what only the agent does.
Assignment recover(const Args& a, int node, C10dRendezvous& rdzv, StoreClient& store, Shared& sh,
                   Round0Barrier& barrier, bool leased, std::chrono::milliseconds every) {
  // Over c10d nothing lapses: the keep-alive counters are only read.
  std::function<void()> beat;
  // A beat that fails is logged and retried, as the agent's are.
  if (leased) beat = [&rdzv] {
    try {
      rdzv.keep_alive();
    } catch (const std::exception& e) {
      spdlog::warn("keep-alive: {}", e.what());
    }
  };
  barrier.arrive_and_wait(sh, a.nodes, beat, every);
  if (node == 0) {
    sh.failed = now_ns();
    rdzv.outcome().publish_failure("{\"rank\": 0, \"exitcode\": 1}");
  }
  // The agent's round watcher waits on a thread of its own while the
  // agent goes on renewing its lease, reads the event in the same call, and
  // hands it to the rendezvous (C10dBackend::watch).
  for (const auto until = Clock::now() + std::chrono::seconds(a.timeout_s);;) {
    try {
      rdzv.outcome().learned_event(rdzv.round(), parse_round_event(store.get(rdzv.outcome().event_key(), every)));
      break;
    } catch (const cxxrun::store::StoreTimeout&) {
      if (Clock::now() >= until) throw;
      if (beat) beat();
    }
  }
  at_least(sh.last_woken, now_ns());
  const int dead = rdzv.outcome().current_event() == RoundEvent::dead ? 1 : 0;
  // Nothing changed but the failure: the join's ADD checks it, no read first.
  std::optional<Assignment> next = rdzv.rejoin_if_unchanged(std::max(1, rdzv.members() - dead));
  if (!next) {
    const auto [waiting, left] = rdzv.waiting_and_stepped_out();
    rdzv.start_next_round(waiting != 0);
    next = rdzv.next_rendezvous(std::max(1, rdzv.members() + waiting - dead), left);
  }
  at_least(sh.last_done, now_ns());
  return *next;
}

// One simulated agent's rendezvous: its store, then the first round (and,
// with --recover, the next).
Assignment one_agent(const Args& a, int node, const RendezvousSettings& s, std::unique_ptr<EtcdJobStore>& etcd,
                     Shared& sh, Round0Barrier& barrier) {
  auto pick = [](const std::vector<std::string>&) { return 29500; };
  auto quiet = [](const std::string&) {};
  if (a.etcd.empty()) {
    StoreClient::Options options;
    options.host = a.host;
    options.port = a.port;
    options.timeout = std::chrono::seconds(a.timeout_s);
    auto client = StoreClient::connect(options);
    C10dRendezvous rdzv(*client, s, pick, quiet);
    Assignment first = rdzv.next_rendezvous();
    return a.recover ? recover(a, node, rdzv, *client, sh, barrier, false, s.keep_alive_interval) : first;
  }
  etcd = std::make_unique<EtcdJobStore>(s);
  C10dRendezvous rdzv(etcd->client(), s, pick, quiet);
  rdzv.use_liveness(*etcd->liveness());
  Assignment first = rdzv.next_rendezvous();
  return a.recover ? recover(a, node, rdzv, etcd->client(), sh, barrier, true, s.keep_alive_interval) : first;
}

// Agents [first, last) of the job, a thread each, in this process.
void run_agents(const Args& args, const std::string& run_id, int first, int last, Shared& sh) {
  std::vector<std::unique_ptr<EtcdJobStore>> etcd(static_cast<size_t>(last - first));
  Round0Barrier barrier;
  std::vector<std::thread> threads;
  threads.reserve(etcd.size());
  for (int i = first; i < last; ++i) {
    threads.emplace_back([&, i] {
      try {
        Assignment a = one_agent(args, i, settings_for(args, run_id, i), etcd[i - first], sh, barrier);
        if (a.group_rank >= 0 && a.group_rank < args.nodes) ++sh.rank_count()[a.group_rank];
        if (a.world_size != args.nodes * args.nproc) ++sh.failures;
      } catch (const std::exception& e) {
        if (sh.failures++ == 0) fprintf(stderr, "rdzv_load: node %d: %s\n", i, e.what());
      }
    });
  }
  for (auto& t : threads) t.join();
  at_least(sh.assigned, now_ns());
  // Not timed: every agent leaves, as the last member of a finished job
  // would, so etcd keeps no keys or leases of the run.
  threads.clear();
  for (auto& store : etcd)
    if (store) threads.emplace_back([&store, n = args.nodes] { store->leave(true, n, {}); });
  for (auto& t : threads) t.join();
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (!parse(argc, argv, args)) return 2;
  spdlog::set_level(spdlog::level::warn);  // not a line per simulated agent
  if (const char* level = getenv("RDZV_LOAD_LOG")) spdlog::set_level(spdlog::level::from_str(level));
  bench_procs::open_files_to_hard_limit();
  const std::string run_id = "load" + std::to_string(getpid());
  Shared* sh = Shared::create(args.nodes);
  if (!sh) {
    perror("rdzv_load: mmap");
    return 1;
  }
  const int64_t start = now_ns();
  bench_procs::in_processes("rdzv_load", args.nodes, args.procs, sh->failures,
                            [&](int first, int last) { run_agents(args, run_id, first, last, *sh); });
  const double secs = static_cast<double>(sh->assigned - start) / 1e9;
  int failures = sh->failures;
  for (int r = 0; r < args.nodes; ++r)
    if (sh->rank_count()[r] != 1) ++failures;
  printf("{\"store\": \"%s\", \"nodes\": %d, \"seconds\": %.3f, \"failures\": %d",
         args.etcd.empty() ? "tcpstore" : "etcd", args.nodes, secs, failures);
  if (args.recover) {
    auto span = [](int64_t a, int64_t b) { return static_cast<double>(b - a) / 1e9; };
    printf(", \"recovery_s\": %.3f, \"abort_push_s\": %.3f, \"rejoin_assign_s\": %.3f",
           span(sh->failed, sh->last_done), span(sh->failed, sh->last_woken), span(sh->last_woken, sh->last_done));
  }
  if (args.procs > 1) printf(", \"procs\": %d", args.procs);
  printf("}\n");
  return failures == 0 ? 0 : 1;
}
