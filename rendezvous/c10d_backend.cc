#include "rendezvous/c10d_backend.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "rendezvous/ctl_requests.h"
#include "rendezvous/round_completion.h"

namespace cxxrun::rendezvous {
namespace {

// The deadline of a board publish and of a straggler exchange: short, since
// the link thread that makes them also carries the keep-alives.
constexpr std::chrono::milliseconds kBoardTimeout{2000};

}  // namespace

C10dBackend::C10dBackend(const RendezvousConfig& config, const WorkerStorePlan& workers, OpenStore open)
    : config_(config), plan_(workers), open_(std::move(open)) {}

C10dBackend::~C10dBackend() = default;

Assignment C10dBackend::join() {
  const RendezvousSettings& s = config_.settings;
  store_ = open_(config_);
  const std::string local = s.local_addr.empty() ? store_->client().local_address() : s.local_addr;
  // Asked only when this node becomes group rank 0: where its workers'
  // store will be (the MASTER_PORT rule, worker_store.h).
  auto pick = [this, local](const std::vector<std::string>& members) {
    return workers_.settle(plan_.agent_serves, bind_host_for(local), local, 0, members);
  };
  rdzv_ = std::make_unique<C10dRendezvous>(store_->client(), s, pick,
                                           [](const std::string& line) { spdlog::info("{}", line); });
  if (MemberLiveness* liveness = store_->liveness()) {
    rdzv_->use_liveness(*liveness);
  } else {
    beats_ = store_->connect_another(std::max(std::chrono::milliseconds(500), s.keep_alive_interval));
    rdzv_->use_for_keep_alives(*beats_);
  }
  return joined(rdzv_->next_rendezvous());
}

Assignment C10dBackend::rejoin() {
  int expected = std::max(1, rdzv_->members());
  int left = 0;  // members that stepped out (a failed health check)
  int read_left = -1;  // the same, as read just now: the join's first look takes it
  int waiting = -1;    // nodes waiting beyond the round (spares, late joiners); -1 unknown
  const auto& settings = config_.settings;
  if (store_gone_)
    throw RendezvousLost("the rendezvous store at " + settings.endpoint + " did not answer within read_timeout=" +
                          std::to_string(settings.read_timeout.count()) +
                          " ms (etcd without quorum?); the job cannot re-form without it");
  std::optional<int> dead;
  try {
    // Whoever found members dead counted them: every survivor expects the
    // same number back, and too few is an error now, not after join_timeout.
    RoundOutcome& outcome = rdzv_->outcome();
    dead = outcome.current_event() == RoundEvent::dead ? std::max({1, dead_seen_, outcome.dead_count()}) : 0;
  } catch (const store::StoreError&) {
    // The next round's join reports a store that is really gone.
  }
  if (dead) {
    // Most re-joins follow a failure or a death and nothing else: no spare
    // waits, none stepped out. Enough nodes are left then without counting
    // spares, and the join's ADD checks that nothing else changed, reading
    // nothing first (over etcd, a request less from every node).
    const int alive = std::max(1, rdzv_->members() - *dead);
    if (std::min(alive, settings.max_nodes) >= settings.min_nodes)
      if (auto a = rdzv_->rejoin_if_unchanged(alive)) return joined(*a);
    try {
      // Spares count: a fixed-size job whose member died goes on at the same
      // size when one waits (it stopped, "only N-1 nodes alive", before).
      // Those that stepped out are taken off by the round's join itself, as
      // are those that step out while it waits.
      // One round trip for both reads (none after the check above: it read them).
      const C10dRendezvous::Waiting read = rdzv_->waiting_and_stepped_out();
      waiting = read.waiting;
      expected = std::max(1, rdzv_->members() - *dead + waiting);
      left = read_left = read.stepped_out;
    } catch (const store::StoreError&) {
      // The next round's join reports a store that is really gone.
    }
  }
  const int coming = std::min(expected - left, settings.max_nodes);
  if (coming < settings.min_nodes) {
    // Enough without those that stepped out: the step-out is the cause, in
    // the words the round's join would use had it read the count first.
    if (left > 0 && std::min(expected, settings.max_nodes) >= settings.min_nodes)
      throw RendezvousLost(stepped_out_too_few(settings, left, coming));
    throw RendezvousLost(too_few_alive(settings, coming));
  }
  spdlog::info("{}", C10dRendezvous::reforming_line(coming));
  rdzv_->start_next_round(waiting != 0);
  return joined(rdzv_->next_rendezvous(expected, read_left));
}

Assignment C10dBackend::joined(const Assignment& a) {
  dead_seen_ = 0;
  last_beat_ok_ = std::chrono::steady_clock::now();  // the round just proved the store alive
  speeds_ = std::make_unique<SpeedBoard>([this] { return store_->connect_another(kBoardTimeout); },
                                         rdzv_->round_prefix(), a.group_rank, a.group_world_size);
  if (watcher_) watcher_->watch(a.round, rdzv_->outcome().event_key());
  return a;
}

void C10dBackend::watch(OnEvent on_event) {
  watcher_.reset();
  if (!on_event) return;
  // The event the watcher hands on stands for its round: the re-join it
  // leads to takes it from the rendezvous instead of reading it again.
  std::unique_ptr<store::StoreClient> client;
  try {
    client = store_->connect_another(config_.settings.read_timeout);
  } catch (const std::exception& e) {
    // Thrown on the link's thread, it ended the agent (std::terminate). A
    // store this node cannot reach is the keep-alives' to report.
    spdlog::warn("cannot watch the rendezvous store for events: {}", e.what());
    return;
  }
  // Its connection waits for round events only: told the whole milestone
  // prefix, its watch brought every member every round's completion, wake
  // keys, assignment and master a second time.
  client->expect_waits_under(rdzv_->event_prefix());
  watcher_ = std::make_unique<RoundWatcher>(std::move(client),
                                            [this, on_event = std::move(on_event)](int round, RoundEvent what) {
                                              rdzv_->outcome().learned_event(round, what);
                                              on_event(round, what);
                                            });
  watcher_->watch(rdzv_->round(), rdzv_->outcome().event_key());
}

// Failures are logged, never thrown: a store hiccup must not kill a healthy
// job.
bool C10dBackend::keep_alive() {
  try {
    if (fault_.delay.count() > 0) std::this_thread::sleep_for(fault_.delay);
    if (fault_.drop) throw store::StoreError("connection dropped by fault injection");
    rdzv_->keep_alive();
    if (beat_failures_ > 0) spdlog::info("keep-alives reach the rendezvous store again");
    beat_failures_ = 0;
    store_gone_ = false;
    last_beat_ok_ = std::chrono::steady_clock::now();
    return true;
  } catch (const std::exception& e) {
    if (beat_failures_++ == 0) spdlog::warn("keep-alive to the rendezvous store failed: {}", e.what());
  }
  return false;
}

bool C10dBackend::store_lost() const {
  const auto& s = config_.settings;
  return std::chrono::steady_clock::now() - last_beat_ok_ >= s.keep_alive_interval * s.keep_alive_max_attempt;
}

Rendezvous::Liveness C10dBackend::check_members() {
  Liveness out{{}, rdzv_->members()};
  // While beats fail, keep_alive() speaks for the store.
  if (beat_failures_ > 0) return out;
  try {
    out.dead = rdzv_->dead_members();
  } catch (const std::exception&) {
    return out;
  }
  if (out.dead.empty()) return out;
  // Members are judged while this node waits for the others too, and one
  // whose workers succeeded leaves once the round is done: gone, not dead.
  try {
    if (rdzv_->outcome().current_event() == RoundEvent::done) return Liveness{{}, rdzv_->members()};
  } catch (const std::exception&) {
    return Liveness{{}, rdzv_->members()};  // the next check decides
  }
  const auto& s = config_.settings;
  out.alive -= static_cast<int>(out.dead.size());
  std::string ranks;
  for (int r : out.dead) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
  spdlog::warn("node rank {} sent no keep-alive for {} ms", ranks,
               (s.keep_alive_interval * s.keep_alive_max_attempt).count());
  dead_seen_ = static_cast<int>(out.dead.size());
  try {
    rdzv_->outcome().publish_dead(dead_seen_);
  } catch (const std::exception& e) {
    spdlog::warn("cannot tell the other nodes: {}", e.what());
  }
  // Too few left by themselves: waiting nodes (spares too) may fill the
  // places. Read only then, after the others were told: it costs a store
  // read, and rejoin() counts again anyway.
  if (out.alive < s.min_nodes) {
    try {
      out.alive = std::min(s.max_nodes, out.alive + rdzv_->num_nodes_waiting());
    } catch (const std::exception&) {
      // Unknown: the members left must do.
    }
  }
  return out;
}

void C10dBackend::coordination_failed(const char* what, const std::exception& e) {
  spdlog::warn("{}: {}", what, e.what());
  if (survives_store_outage()) store_gone_ = true;
}

void C10dBackend::publish_failure(const std::string& record) {
  if (store_gone_) return;
  try {
    rdzv_->outcome().publish_failure(record);
  } catch (const std::exception& e) {
    coordination_failed("cannot tell the other nodes about the failure", e);
  }
}

RoundEvent C10dBackend::finish_round() {
  if (store_gone_) return RoundEvent::none;
  try {
    return rdzv_->outcome().finish_round();
  } catch (const std::exception& e) {
    coordination_failed("cannot report success to the rendezvous store", e);
    return RoundEvent::none;
  }
}

std::vector<std::string> C10dBackend::failure_records(std::chrono::milliseconds limit) {
  if (store_gone_) return {};
  try {
    rdzv_->outcome().wait_all_stopped(limit);
    return rdzv_->outcome().failure_records();
  } catch (const std::exception& e) {
    spdlog::warn("cannot read the job's failures from the rendezvous store: {}", e.what());
    return {};
  }
}

std::vector<std::string> C10dBackend::published_failures() {
  if (store_gone_) return {};
  try {
    return rdzv_->outcome().failure_records();
  } catch (const std::exception& e) {
    spdlog::warn("cannot read the job's failures from the rendezvous store: {}", e.what());
    return {};
  }
}

// Without the store each node judges alone: its own record, its own
// proposal. Nodes may then disagree; a job whose store is gone ends anyway.
std::vector<std::string> C10dBackend::attempt_records(const std::string& mine, std::chrono::milliseconds limit) {
  if (store_gone_) return {mine};
  try {
    rdzv_->outcome().publish_attempt(mine);
    rdzv_->outcome().wait_all_stopped(limit);
    return rdzv_->outcome().attempt_records();
  } catch (const std::exception& e) {
    coordination_failed("cannot share this attempt's progress through the rendezvous store", e);
    return {mine};
  }
}

std::string C10dBackend::settle_verdict(const Proposal& propose) {
  if (store_gone_) return propose("");
  try {
    return rdzv_->outcome().settle_verdict(propose);
  } catch (const std::exception& e) {
    coordination_failed("cannot settle the restart verdict through the rendezvous store", e);
    return propose("");
  }
}

void C10dBackend::leave(bool succeeded) {
  // A lost store cannot be told anything; every call would wait out its
  // deadline.
  if (!store_ || store_lost()) return;
  store_->leave(succeeded, rdzv_ ? rdzv_->members() : 1, [this, succeeded] {
    if (rdzv_) rdzv_->close(succeeded);
  });
}

// Straggler summaries are best effort: a window lost to a store hiccup is
// one window of detection, never the job.
std::string C10dBackend::exchange_speed(const std::string& summary) {
  if (store_gone_ || !speeds_) return "";
  try {
    return speeds_->exchange(summary);
  } catch (const std::exception& e) {
    spdlog::debug("cannot share this node's straggler summary: {}", e.what());
    return "";
  }
}

std::vector<std::string> C10dBackend::node_speeds() {
  if (store_gone_ || !speeds_) return {};
  try {
    return speeds_->all();
  } catch (const std::exception& e) {
    spdlog::debug("cannot read the nodes' straggler summaries: {}", e.what());
    return {};
  }
}

void C10dBackend::tell_node(int group_rank, const std::string& verdict) {
  if (store_gone_ || !speeds_) return;
  try {
    speeds_->tell(group_rank, verdict);
  } catch (const std::exception& e) {
    spdlog::debug("cannot tell node rank {} it is a straggler: {}", group_rank, e.what());
  }
}

bool C10dBackend::call_spare() {
  if (store_gone_ || !rdzv_) return false;
  try {
    return rdzv_->num_nodes_waiting() > 0 && rdzv_->outcome().publish_event(RoundEvent::join) == RoundEvent::join;
  } catch (const std::exception& e) {
    spdlog::warn("cannot call a waiting spare in: {}", e.what());
    return false;
  }
}

void C10dBackend::step_out() {
  if (store_ && rdzv_ && !store_lost()) rdzv_->step_out();
}

void C10dBackend::decline(const std::string& why) {
  const RendezvousSettings& s = config_.settings;
  if (config_.is_host.value_or(false)) {
    spdlog::warn("this node was to host the rendezvous store (--rdzv-conf is_host=true): the other nodes cannot be "
                 "told that it steps out, and wait for it up to join_timeout");
    return;
  }
  RendezvousConfig client = config_;
  client.is_host = false;
  client.settings.join_timeout = std::min(s.join_timeout, kDeclineBound);
  client.settings.read_timeout = std::min(s.read_timeout, kDeclineBound);
  try {
    auto store = open_(client);
    C10dRendezvous(store->client(), client.settings, nullptr, [](const std::string&) {}).decline(why);
    spdlog::info("told the other nodes of rendezvous '{}' at {} that this node steps out", s.run_id, s.endpoint);
  } catch (const std::exception& e) {
    spdlog::warn("cannot tell the other nodes that this node steps out ({}); they wait for it up to join_timeout",
                 e.what());
  }
}

void C10dBackend::inject(const StoreFault& fault) {
  if (fault.drop) {
    spdlog::warn("fault injection: dropping this node's store connection");
    // The watcher is this node's ear on the store: it goes deaf too.
    watcher_.reset();
  }
  fault_.drop = fault_.drop || fault.drop;
  if (fault.delay.count() > 0) fault_.delay = fault.delay;
}

}  // namespace cxxrun::rendezvous

namespace cxxrun::rendezvous {

std::optional<board::StopRequest> C10dBackend::publish_board(const std::string& node, const std::string& record) {
  if (!store_ || fault_.drop) return std::nullopt;
  try {
    if (!board_) board_ = store_->connect_another(kBoardTimeout);
    board::publish(*board_, config_.settings.run_id, node, record, !board_indexed_);
    board_indexed_ = true;
    return board::stop_requested(*board_, config_.settings.run_id);
  } catch (const std::exception& e) {
    board_.reset();
    spdlog::debug("could not publish this node's board record: {}", e.what());
  }
  return std::nullopt;
}

void C10dBackend::abandon() {
  // The store's every connection, the one a watch is making on the link
  // (watch_requests, watch) or a watcher is remaking on its thread included:
  // any of them retrying held the agent's exit for read_timeout.
  if (store_) store_->abandon();
  if (beats_) beats_->cancel();
}

void C10dBackend::watch_requests(OnRequest on_request) {
  requests_.reset();
  if (!on_request || !store_) return;
  try {
    requests_ = std::make_unique<RequestWatcher>(store_->connect_another(config_.settings.read_timeout),
                                                 config_.settings.run_id, std::move(on_request));
  } catch (const std::exception& e) {
    spdlog::warn("cxxrunctl's requests will not reach this node: {}", e.what());
  }
}

void C10dBackend::answer_request(long long n, const std::string& node, const std::string& answer) {
  if (!store_ || fault_.drop) return;
  try {
    if (!board_) board_ = store_->connect_another(kBoardTimeout);
    requests::answer(*board_, config_.settings.run_id, n, node, answer);
  } catch (const std::exception& e) {
    board_.reset();
    spdlog::debug("could not answer cxxrunctl's request {}: {}", n, e.what());
  }
}

}  // namespace cxxrun::rendezvous
