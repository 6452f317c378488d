// An event-driven load generator for the c10d rendezvous: N simulated agents
// join one job's first round against a real store (cxxrun-rdzv), from one
// thread with one epoll, so that the generator is not the limit (rdzv_load,
// a thread per agent running the real C10dRendezvous, is, on 2 cores).
//
// Each agent makes the store requests C10dRendezvous::next_rendezvous makes
// for a first round of --nnodes=N (rendezvous/c10d_rendezvous.h's keys), in
// its order, one at a time on one connection, in torch's modern TCPStore wire
// bytes: COMPARE_SET config and round, ADD count, SET its descriptor (the
// N-th also COMPARE_SETs complete and SETs its wake key), WAIT+GET complete;
// the completer WAITs for every descriptor, MULTI_GETs them and MULTI_SETs
// every assignment and then the round's `assigned` milestone; each agent
// WAITs for that and reads its assignment (a COMPARE_SET that writes
// nothing, as get_if_set does), rank 0 SETs master,
// and each other WAIT+GETs master. If C10dRendezvous's first round changes, this
// must follow; tests/unit/rendezvous/test_c10d_rendezvous.cc holds the algorithm itself.
//
//   rdzv_sim --port P [--host 127.0.0.1] --nodes 10000 [--nproc 8] [--timeout 60] [--recover 1]
//
// --recover 1: then in-job recovery, as C10dBackend::rejoin makes it after
// one worker's failure: one member publishes its failure record and the
// `abort` event; every agent, woken by its WAIT on the event key, GETs the
// event (RoundWatcher), reads the waiting count and who stepped out in one
// round trip with the round number and the config (COMPARE_SETs that write
// nothing, written together: StoreClient::add_if_unchanged's check, as a
// TCPStore makes it; the re-join takes the event from its watcher), joins
// round 1 expecting N (`next` only where a node waits, none
// here), its ADD carrying the COMPARE_SET that opens the round where it
// read the round not yet opened, and gets its new assignment. Stopping the workers is local
// and not simulated (0 here; docs of the restart path time it).
//
// Prints one line of JSON: the wall time from the first connect to the last
// agent holding its assignment and master, when the phases ended (all
// connected, all joined = every ADD answered, the round complete for all,
// the assignments written, all done), and whether group ranks 0..N-1 came
// out exactly once with one master.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "args.h"
#include "procs.h"
#include "rdzv_sim_conn.h"
#include "wire_bytes.h"

using Clock = std::chrono::steady_clock;

namespace {

// One agent: its connection (rdzv_sim_conn.h) and where it is in the algorithm.
struct Agent : rdzv_sim::StoreConn {
  int step = 0;
  int slot = -1;
  int rank = -1;
  std::string master;
  int members = 0, assigner = -1;
  int round = 0;
  bool opens = false;  // round 1's ADD carries the COMPARE_SET that opens it
  int64_t count = 0;   // the ADD's answer, while the opening's is read
};

struct Options {
  std::string host = "127.0.0.1";
  int port = 0, nodes = 10000, nproc = 8;
  double timeout = 60;
  bool recover = false;  // then one failure, and the job re-formed
};

class Sim {
 public:
  explicit Sim(const Options& o) : o_(o), agents_(o.nodes), run_("sim" + std::to_string(getpid())) {
    ep_ = epoll_create1(EPOLL_CLOEXEC);
    target_.sin_family = AF_INET;
    target_.sin_port = htons(o.port);
    inet_pton(AF_INET, o.host.c_str(), &target_.sin_addr);
  }

  int run() {
    start_ = Clock::now();
    for (int i = 0; i < o_.nodes; ++i)
      if (!connect_agent(i)) return 1;
    t_connected_ = Clock::now();
    const auto deadline = start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.timeout));
    std::vector<epoll_event> events(4096);
    const int rounds = o_.recover ? 2 : 1;
    while (done_[rounds - 1] + failed_ < o_.nodes && Clock::now() < deadline) {
      const int n = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), 50);
      for (int k = 0; k < n; ++k) on_event(static_cast<int>(events[k].data.u32), events[k].events);
    }
    return report();
  }

 private:
  std::string key(const std::string& suffix) const { return "cxxrun/rdzv/" + run_ + "/" + suffix; }
  std::string r0(const std::string& suffix) const { return key("r0/" + suffix); }
  // The agent's current round's key, and its milestones (m/r<k>/...).
  std::string rk(const Agent& a, const std::string& suffix) const {
    return key("r" + std::to_string(a.round) + "/" + suffix);
  }
  std::string mk(const Agent& a, const std::string& suffix) const {
    return key("m/r" + std::to_string(a.round) + "/" + suffix);
  }
  // The round's event: apart from its milestones (event/r<k>, rendezvous/c10d_rendezvous.h).
  std::string event_key(const Agent& a) const { return key("event/r" + std::to_string(a.round)); }
  std::string addr(int i) const { return "10." + std::to_string(i / 62500) + "." + std::to_string(i / 250 % 250) + "." + std::to_string(i % 250 + 1); }
  // Member::describe: addr|host|pid|nproc|order|group, no node_order.
  std::string describe(int i) const { return addr(i) + "|sim|" + std::to_string(i) + "|" + std::to_string(o_.nproc) + "|1073741824|"; }
  std::string config() const { return std::to_string(o_.nodes) + ":" + std::to_string(o_.nodes) + "|rdzv_sim"; }

  bool connect_agent(int i) {
    Agent& a = agents_[i];
    a.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (a.fd < 0) return fprintf(stderr, "rdzv_sim: socket: %s\n", strerror(errno)), false;
    int one = 1;
    setsockopt(a.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(a.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr.s_addr = htonl((127u << 24) | ((1u + static_cast<uint32_t>(i / 5000)) << 8) | 1u);
    if (bind(a.fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0)
      return fprintf(stderr, "rdzv_sim: bind: %s\n", strerror(errno)), false;
    if (connect(a.fd, reinterpret_cast<sockaddr*>(&target_), sizeof target_) != 0 && errno != EINPROGRESS)
      return fprintf(stderr, "rdzv_sim: connect: %s\n", strerror(errno)), false;
    // The first request goes once connected: VALIDATE, then check_config.
    bench_wire::put_validate(a.out);
    a.cas(key("config"), "", config());
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLOUT;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(ep_, EPOLL_CTL_ADD, a.fd, &ev);
    return true;
  }

  void fail(int i, const std::string& why) {
    if (failed_++ == 0) fprintf(stderr, "rdzv_sim: agent %d: %s\n", i, why.c_str());
    epoll_ctl(ep_, EPOLL_CTL_DEL, agents_[i].fd, nullptr);
  }

  void flush(int i) {
    Agent& a = agents_[i];
    while (!a.out.empty()) {
      const ssize_t n = send(a.fd, a.out.data(), a.out.size(), MSG_NOSIGNAL);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) break;
      if (n <= 0) return fail(i, std::string("send: ") + strerror(errno));
      a.out.erase(0, static_cast<size_t>(n));
    }
    // Only when that changes: an epoll_ctl per request made the generator
    // cost as much CPU as the store it loads, on the same two cores.
    const bool want_out = !a.out.empty();
    if (want_out == a.polls_out) return;
    a.polls_out = want_out;
    epoll_event ev{};
    ev.events = EPOLLIN | (want_out ? static_cast<uint32_t>(EPOLLOUT) : 0u);
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(ep_, EPOLL_CTL_MOD, a.fd, &ev);
  }

  void on_event(int i, uint32_t events) {
    Agent& a = agents_[i];
    if (a.step < 0) {  // done: at most group rank 0's SET of master still to send
      if (events & EPOLLOUT) flush(i);
      return;
    }
    if (events & (EPOLLERR | EPOLLHUP)) return fail(i, "connection lost");
    if (events & EPOLLOUT) flush(i);
    if (!(events & EPOLLIN)) return;
    char buf[65536];
    for (;;) {
      const ssize_t n = recv(a.fd, buf, sizeof buf, 0);
      if (n > 0) {
        a.in.append(buf, static_cast<size_t>(n));
        // A short read took all there was (epoll is level-triggered: more
        // arriving later is reported again); reading on would cost a
        // failing recv per reply.
        if (static_cast<size_t>(n) < sizeof buf) break;
        continue;
      }
      if (n == 0) return fail(i, "the store closed the connection");
      break;
    }
    std::vector<std::string> values;
    int64_t number = 0;
    while (a.step >= 0 && a.take(values, number)) {
      advance(i, values, number);
      values.clear();
    }
    // Group rank 0 is done with its SET of master still to send.
    if (a.step >= 0 || !a.out.empty()) flush(i);
  }

  // The next request after a reply, as C10dRendezvous::join makes them.
  void advance(int i, const std::vector<std::string>& v, int64_t number) {
    Agent& a = agents_[i];
    const int last = o_.nodes - 1;
    switch (a.step++) {
      case 0:  // config
        if (v.at(0) != config()) return fail(i, "config is '" + v.at(0) + "'");
        return a.cas(key("round"), "", "0");
      case 1:  // round
        return a.add(rk(a, "count"), 1);
      case 2:  // count: the slot
        a.slot = static_cast<int>(number) - 1;
        if (++joined_[a.round] == o_.nodes) t_joined_[a.round] = Clock::now();
        a.set(rk(a, "node/" + std::to_string(a.slot)), describe(i));
        if (a.slot == last) return a.cas(mk(a, "complete"), "", std::to_string(o_.nodes) + "|" + std::to_string(a.slot));
        // Re-forming, the first look takes who stepped out from the re-join's read.
        a.step = 4;
        return a.wait({mk(a, "complete")});
      case 3:  // the completer's COMPARE_SET
        a.set(mk(a, "wake/" + std::to_string(last)), "complete");
        return completed(i, v.at(0));
      case 4:  // complete exists
        return a.get(mk(a, "complete"));
      case 5:
        return completed(i, v.at(0));
      case 6: {  // the assigner: every descriptor is there
        std::vector<std::string> keys;
        for (int s = 0; s < o_.nodes; ++s) keys.push_back(rk(a, "node/" + std::to_string(s)));
        return a.multi_get(keys);
      }
      case 7:
        publish(a, v);
        a.step = 8;
        return a.wait({mk(a, "assigned")});
      case 8:  // every assignment is written: this node's, in one read
        return a.get_if_set(rk(a, "assign/" + std::to_string(a.slot)));
      case 9:
        a.rank = atoi(v.at(0).c_str());
        // Group rank 0 writes the master and knows it; the others wait for it.
        if (a.rank != 0) return a.wait({mk(a, "master")});
        a.set(mk(a, "master"), addr(i) + ":29500");
        return assigned(i, addr(i) + ":29500");
      case 10:
        return a.get(mk(a, "master"));
      case 11:
        return assigned(i, v.at(0));
      // In-job recovery: C10dBackend::rejoin after the `abort` event.
      case 20:  // woken: the watcher's GET of the event
        if (++woken_ == o_.nodes) t_woken_ = Clock::now();
        return a.get(event_key(a));
      case 21:  // waiting_and_stepped_out: ADD count 0 and reads (get_if_set's COMPARE_SET) of the
                // step-outs, the round number and the config, one write
        a.add(rk(a, "count"), 0);
        a.cas(rk(a, "out"), rdzv_sim::kNeverStored, rdzv_sim::kNeverStored);
        a.cas(key("round"), rdzv_sim::kNeverStored, rdzv_sim::kNeverStored);
        a.cas(key("config"), rdzv_sim::kNeverStored, rdzv_sim::kNeverStored);
        a.want = rdzv_sim::Reply::i64;
        return;
      case 22:  // the count; the three reads' answers come behind it
        if (number != o_.nodes) return fail(i, "count is " + std::to_string(number));
        a.want = rdzv_sim::Reply::list, a.list_n = 3;
        return;
      case 23:  // start_next_round answers from the reads (no node waits: no `next`); round 1's join:
                // its ADD, with the COMPARE_SET that opens the round where this node read it not yet opened
        if (v.at(0) != rdzv_sim::kNeverStored) return fail(i, "someone stepped out");
        if (v.at(2) != config()) return fail(i, "config wrong");
        if (v.at(1) != "0" && v.at(1) != "1") return fail(i, "round is '" + v.at(1) + "'");
        a.round = 1;
        a.opens = v.at(1) == "0";
        a.add(rk(a, "count"), 1);
        if (a.opens) a.cas(key("round"), "0", "1");
        a.want = rdzv_sim::Reply::i64;
        return;
      case 24:  // the count; the opening's answer behind it, if sent
        a.count = number;
        if (a.opens) {
          a.want = rdzv_sim::Reply::bytes;
          return;
        }
        [[fallthrough]];
      case 25:  // round 1: the same join from its ADD's answer on
        a.step = 2;
        return advance(i, {}, a.count);
    }
  }

  void assigned(int i, const std::string& master) {
    Agent& a = agents_[i];
    a.master = master;
    a.step = -1;
    t_done_[a.round] = Clock::now();
    if (++done_[a.round] == o_.nodes && a.round == 0 && o_.recover) fail_one();
    // Its watcher's WAIT on the round's event (RoundWatcher; here on the
    // same connection, which does nothing else during the round).
    if (a.round == 0 && o_.recover) a.step = 20, a.wait({event_key(a)});
  }

  // One member's worker fails: its agent adds its failure record and ends
  // the round with `abort` (RoundOutcome::publish_failure), on a
  // connection of its own.
  void fail_one() {
    publisher_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(publisher_, reinterpret_cast<sockaddr*>(&target_), sizeof target_) != 0) {
      ++failed_;
      return;
    }
    rdzv_sim::StoreConn c;
    bench_wire::put_validate(c.out);
    c.append(r0("failures"), "{\"rank\": 7, \"exitcode\": 1}\n");
    c.cas(key("event/r0"), "", "abort");
    t_failed_ = Clock::now();
    (void)!send(publisher_, c.out.data(), c.out.size(), MSG_NOSIGNAL);
  }

  void completed(int i, const std::string& text) {
    Agent& a = agents_[i];
    const auto bar = text.find('|');
    a.members = atoi(text.substr(0, bar).c_str());
    a.assigner = atoi(text.substr(bar + 1).c_str());
    if (++complete_[a.round] == o_.nodes) t_complete_[a.round] = Clock::now();
    if (a.assigner == a.slot) {
      a.step = 6;
      std::vector<std::string> keys;
      for (int s = 0; s < o_.nodes; ++s) keys.push_back(rk(a, "node/" + std::to_string(s)));
      return a.wait(keys);
    }
    a.step = 8;
    a.wait({mk(a, "assigned")});
  }

  // C10dRendezvous::publish_assignments: ranks by (order, addr, host, pid, slot).
  void publish(Agent& a, const std::vector<std::string>& nodes) {
    struct M {
      std::string addr;
      long pid;
      int nproc;
    };
    std::vector<M> all;
    for (const auto& text : nodes) {
      const auto p1 = text.find('|'), p2 = text.find('|', p1 + 1), p3 = text.find('|', p2 + 1);
      all.push_back({text.substr(0, p1), atol(text.c_str() + p2 + 1), atoi(text.c_str() + p3 + 1)});
    }
    std::vector<int> order(all.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int x, int y) {
      return std::tie(all[x].addr, all[x].pid, x) < std::tie(all[y].addr, all[y].pid, y);
    });
    int world = 0;
    for (const M& m : all) world += m.nproc;
    a.multi_set(all.size() + 2);
    std::string ranks;
    for (int rank = 0, base = 0; rank < static_cast<int>(order.size()); ++rank) {
      const int slot = order[rank];
      a.put(rk(a, "assign/" + std::to_string(slot)));
      a.put(std::to_string(rank) + "|" + std::to_string(base) + "|" + std::to_string(world) + "|");
      base += all[slot].nproc;
      ranks += (rank ? "," : "") + std::to_string(slot);
    }
    a.put(rk(a, "ranks"));
    a.put(ranks);
    a.put(mk(a, "assigned"));  // last: it stands for every key before it
    a.put("1");
    t_assigned_[a.round] = Clock::now();
  }

  int report() {
    const int last = o_.recover ? 1 : 0;
    std::vector<int> seen(o_.nodes, 0);
    bool one_master = true;
    for (const Agent& a : agents_) {
      if (a.rank >= 0 && a.rank < o_.nodes) ++seen[a.rank];
      one_master = one_master && a.master == agents_.front().master;
    }
    const bool ranks_ok =
        done_[last] == o_.nodes && std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; });
    auto at = [&](Clock::time_point t) { return t == Clock::time_point{} ? -1.0 : std::chrono::duration<double>(t - start_).count(); };
    auto span = [](Clock::time_point a, Clock::time_point b) {
      return a == Clock::time_point{} || b == Clock::time_point{} ? -1.0 : std::chrono::duration<double>(b - a).count();
    };
    printf("{\"nodes\": %d, \"done\": %d, \"seconds\": %.3f, \"connected_s\": %.3f, \"joined_s\": %.3f, "
           "\"complete_s\": %.3f, \"assigned_s\": %.3f, \"ranks_ok\": %s, \"one_master\": %s",
           o_.nodes, done_[last], at(t_done_[0]), at(t_connected_), at(t_joined_[0]), at(t_complete_[0]),
           at(t_assigned_[0]), ranks_ok ? "true" : "false", one_master ? "true" : "false");
    // The recovery's phases: the abort event reaching every agent, the new
    // round's joins until it is complete for all, and the assignments.
    if (o_.recover)
      printf(", \"recovery_s\": %.3f, \"abort_push_s\": %.3f, \"rejoin_s\": %.3f, \"assign_s\": %.3f",
             span(t_failed_, t_done_[1]), span(t_failed_, t_woken_), span(t_woken_, t_complete_[1]),
             span(t_complete_[1], t_done_[1]));
    printf("}\n");
    for (Agent& a : agents_)
      if (a.fd >= 0) close(a.fd);
    if (publisher_ >= 0) close(publisher_);
    return ranks_ok && one_master && failed_ == 0 ? 0 : 1;
  }

  const Options o_;
  std::vector<Agent> agents_;
  const std::string run_;
  int ep_ = -1;
  sockaddr_in target_{};
  // Per round (0: the first; 1: the one recovery re-forms).
  Clock::time_point start_{}, t_connected_{}, t_failed_{}, t_woken_{};
  Clock::time_point t_joined_[2]{}, t_complete_[2]{}, t_assigned_[2]{}, t_done_[2]{};
  int joined_[2]{}, complete_[2]{}, done_[2]{};
  int woken_ = 0, failed_ = 0;
  int publisher_ = -1;
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  using bench_args::arg;
  if (!bench_args::parse("rdzv_sim", argc, argv,
                         {arg("--host", o.host), arg("--port", o.port), arg("--nodes", o.nodes),
                          arg("--nproc", o.nproc), arg("--timeout", o.timeout), arg("--recover", o.recover)}))
    return 2;
  in_addr probe{};
  if (o.port <= 0 || o.port > 65535 || o.nodes <= 0 || o.nproc <= 0 || o.timeout <= 0 ||
      inet_pton(AF_INET, o.host.c_str(), &probe) != 1) {
    fprintf(stderr, "rdzv_sim: --port P (1..65535) is required; --nodes, --nproc and --timeout must be positive; "
                    "--host is an IPv4 address\n");
    return 2;
  }
  const rlim_t open_files = bench_procs::open_files_to_hard_limit();
  if (open_files < static_cast<rlim_t>(o.nodes) + 64) {
    fprintf(stderr, "rdzv_sim: RLIMIT_NOFILE's hard limit %lu is below --nodes\n", static_cast<unsigned long>(open_files));
    return 1;
  }
  return Sim(o).run();
}
