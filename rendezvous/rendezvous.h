// The rendezvous seam: everything the agent needs from whatever the nodes of
// a job meet through. The agent joins, sends keep-alives, learns of round
// events, publishes failures and leaves only through Rendezvous; backends
// (local, static, and c10d over a TCPStore or etcd) implement it. docs/architecture.md shows
// where it sits.
//
// Thread rule: every call but watch()'s callback blocks, each with a
// deadline, and calls come from one thread at a time. The agent makes them on
// a thread of their own (agent/rendezvous_link.h), never on its event loop.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "rendezvous/etcd_endpoints.h"
#include "rendezvous/job_board.h"

namespace cxxrun::rendezvous {

// torchrun's c10d rendezvous port, when --rdzv-endpoint names none.
inline constexpr int kDefaultC10dPort = 29400;
// How long a node that declines its first round (Rendezvous::decline) tries
// to reach the store: the reason it exits is already known, and only its
// exit waits.
inline constexpr std::chrono::milliseconds kDeclineBound{10000};

struct RendezvousError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The job finished while this node waited as a spare: not a failure.
struct RendezvousClosed : RendezvousError {
  using RendezvousError::RendezvousError;
};
// A running job cannot re-form: too few nodes are left, or its store is
// gone (exit_code::lost, not a failure to join).
struct RendezvousLost : RendezvousError {
  using RendezvousError::RendezvousError;
};

// The port the user named for the workers' store was taken by the time this
// node bound it (another job started in the same instant): bad input, as if
// the launcher had found it taken (exit_code::usage).
struct PortTaken : RendezvousError {
  using RendezvousError::RendezvousError;
};

// What ended a round for every node; the first one written wins.
enum class RoundEvent {
  none,   // nothing yet
  abort,  // a worker failed somewhere: every node stops and restarts (budget)
  join,   // a node waits to join below MAX: re-form (no budget)
  dead,   // a member stopped its keep-alives: re-form without it (no budget)
  done,   // every member's workers succeeded
};
std::string_view to_string(RoundEvent e);
// "" and unknown words are RoundEvent::none.
RoundEvent parse_round_event(std::string_view text);

// How this node meets the others.
enum class Backend {
  // One node, no rendezvous store: --standalone, or static with --nnodes=1.
  local,
  // torchrun's static backend across nodes: --node-rank, --master-addr/port.
  // Node 0's agent hosts the store on master_port; workers use it too.
  static_tcp,
  // c10d-style rendezvous through the store at --rdzv-endpoint.
  c10d,
  // The same algorithm over an etcd v3 cluster (--rdzv-backend=etcd-v3, and
  // torch's etcd/etcd-v2 names): no agent hosts the job's state.
  etcd,
};

// How to reach etcd: --rdzv-endpoint's members and the --rdzv-conf keys that
// torch's etcd backends read (docs/torchrun-compat.md §4).
struct EtcdSettings {
  // Parsed once, by the launcher (parse_etcd_endpoints); each request fails
  // over to the next.
  std::vector<EtcdEndpoint> endpoints;
  bool https = false;  // protocol=https
  std::string cacert;  // PEM files: the CA that signed the members,
  std::string cert;    // and this client's certificate and key
  std::string key;
  std::string prefix = "/torchelastic/p2p";  // etcd_prefix, torch's default
  // An etcd user's credentials, for clusters with authentication enabled
  // (--rdzv-conf token_file holding NAME:PASSWORD); empty: none.
  std::string username;
  std::string password;
};

struct RendezvousSettings {
  std::string run_id = "none";
  std::string endpoint;  // for messages: "host:port"
  int min_nodes = 1;
  int max_nodes = 1;
  int local_world_size = 1;
  // Joins only agents running the same program: a different entrypoint under
  // the same id is an id clash, not a new member.
  std::string entrypoint;
  // The address other nodes reach this one by; empty = the address this
  // node's store connection uses.
  std::string local_addr;
  // Where this node sorts among a round's members, ahead of its address:
  // the scheduler's node index (SLURM_NODEID) when the launcher derived the
  // job from one, so group rank 0 is on the scheduler's first node.
  std::optional<int> node_order;
  // --node-group: this node's topology group (an NVLink domain, a rack, a
  // leaf switch). A spare of the job's group takes a free place first.
  std::string node_group;
  std::chrono::milliseconds join_timeout{std::chrono::seconds(600)};
  std::chrono::milliseconds last_call_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds close_timeout{std::chrono::seconds(30)};
  std::chrono::milliseconds keep_alive_interval{std::chrono::seconds(1)};
  int keep_alive_max_attempt = 3;
  // Deadline of one store operation (--rdzv-conf read_timeout).
  std::chrono::milliseconds read_timeout{std::chrono::seconds(60)};
  // The static backend's wait for every node (--rdzv-conf timeout).
  std::chrono::milliseconds static_timeout{std::chrono::seconds(900)};
  // How often a waiting node says what it waits for.
  std::chrono::milliseconds progress_interval{std::chrono::seconds(5)};
  EtcdSettings etcd;  // Backend::etcd only
  // The rendezvous store's shared secret (--rdzv-conf token_file, read when
  // the options are parsed); empty: none. The store this node hosts requires
  // it, and every connection to the store proves it.
  std::string token;
};

// Parses the --rdzv-conf keys (docs/torchrun-compat.md, "--rdzv-conf") into
// `settings`; unknown keys and bad values throw std::invalid_argument naming
// them. Returns the is_host value when given ("" when inferred).
std::string apply_rdzv_conf(const std::map<std::string, std::string>& conf, RendezvousSettings& settings);

// Why the job stops when only `alive` of its nodes are left, fewer than
// min_nodes: one wording whether a node's rendezvous counts them before a
// re-join or its agent hears of the deaths while workers run.
std::string too_few_alive(const RendezvousSettings& settings, int alive);

struct RendezvousConfig {
  Backend backend = Backend::local;
  // The backend as torch names it in events, when it differs from what
  // `backend` implies: --standalone runs as Backend::local, torch says c10d.
  std::string name;
  std::string host;  // c10d: endpoint host; static_tcp: master address
  int port = 0;      // c10d: endpoint port (kDefaultC10dPort by default); static_tcp: master port
  // c10d: --rdzv-conf is_host; unset = this agent hosts the store when host
  // is this machine (and falls back to being a client if the port is taken).
  std::optional<bool> is_host;
  int node_rank = 0;  // static_tcp
  int nnodes = 1;     // static_tcp
  RendezvousSettings settings;
};

// Where the workers' store is to be (MASTER_ADDR/MASTER_PORT) as the
// launcher asked; rendezvous/worker_store.h holds the rule that settles it.
struct WorkerStorePlan {
  // The agent serves it (TORCHELASTIC_USE_AGENT_STORE=True); else worker
  // rank 0 hosts its own.
  bool agent_serves = false;
  std::string addr = "127.0.0.1";  // local and static; c10d: rank 0's node
  int port = 0;                    // 0: a free port, chosen by the rule
  int nproc_per_node = 1;
};

// This node's place in the job for one round.
struct Assignment {
  int round = 0;
  int group_rank = 0;
  int group_world_size = 1;
  int base_rank = 0;  // RANK of this node's local rank 0
  int world_size = 1;
  std::string master_addr;
  int master_port = 0;
};

// Faults that tests inject into this node's view of the store.
struct StoreFault {
  bool drop = false;                  // from now on, unreachable
  std::chrono::milliseconds delay{0};  // each keep-alive waits this first
};

class Rendezvous {
 public:
  virtual ~Rendezvous() = default;

  // Blocks until this node has its place in the first round. Throws
  // RendezvousError (RendezvousClosed for a released spare), one line.
  virtual Assignment join() = 0;
  // After a restart or a membership change, with elastic(): opens the next
  // round for everyone and joins it, completing as soon as the nodes
  // expected are in (those of the last round, less the dead, plus the
  // waiting). Throws like join().
  virtual Assignment rejoin() = 0;
  // Before a restart in the same round (not elastic()): the next attempt's
  // workers get an empty store on the same MASTER_PORT.
  virtual void renew_worker_store() = 0;

  // Whether a failure on one node restarts every node through a new round,
  // with round events, keep-alives and failure records.
  virtual bool elastic() const = 0;
  // Whether the job goes on while the store is unreachable: a replicated
  // store (etcd) that lost quorum comes back, and only coordination waits
  // for it. Otherwise an unreachable store ends the job.
  virtual bool survives_store_outage() const { return false; }
  // The period of keep_alive(); zero when the backend has none.
  virtual std::chrono::milliseconds keep_alive_interval() const = 0;
  // One beat; whether it got through. A store hiccup is logged, not thrown.
  // Whether the store is lost is the caller's to judge, by the time since
  // the last beat that got through (agent/keep_alive.h).
  virtual bool keep_alive() = 0;
  // Members whose keep-alives stopped (by group rank); when there are any,
  // the round's event becomes `dead`. `alive` counts the nodes that can
  // form the next round: the members left, and the nodes waiting to join
  // (spares included), at most --nnodes' maximum.
  struct Liveness {
    std::vector<int> dead;
    int alive = 0;
  };
  virtual Liveness check_members() = 0;

  // Delivers each round's event once, from a thread of the backend's own,
  // with the round it belongs to; the callee must only hand it to its loop.
  // An empty `on_event` stops watching: no call comes after it returns.
  using OnEvent = std::function<void(int round, RoundEvent event)>;
  virtual void watch(OnEvent on_event) = 0;
  // Adds this node's failure record (one line of JSON) to the round's and
  // ends the round with `abort` unless another event came first.
  virtual void publish_failure(const std::string& record) = 0;
  // This node's workers all succeeded; the last member ends the round with
  // `done`. Returns the event that now stands (none if none yet).
  virtual RoundEvent finish_round() = 0;
  // After a failure: waits, at most `limit`, for every member's workers to
  // stop, then returns every failure record of the round in arrival order.
  virtual std::vector<std::string> failure_records(std::chrono::milliseconds limit) = 0;
  // The failure records published so far, as they are: not a sign that this
  // node stopped (failure_records() is). Empty where no record is shared.
  virtual std::vector<std::string> published_failures() { return {}; }

  // The job's restart history (agent/verdict/job_history.h). After a
  // failure: adds this node's record of the attempt (one line) to the
  // round's, waits at most `limit` for every member's workers to stop (as
  // failure_records() does), and returns every record of the round, this
  // node's among them. Where nothing is shared, only this node's.
  virtual std::vector<std::string> attempt_records(const std::string& mine, std::chrono::milliseconds limit) {
    (void)limit;
    return {mine};
  }
  // Settles the round's verdict once for every member: the first proposal
  // stored stands, and every member gets it. `propose` is given the job's
  // last settled verdict ("" when the rendezvous holds none) and returns
  // this node's. Returns the verdict that stands; where nothing is shared,
  // this node's proposal.
  using Proposal = std::function<std::string(const std::string& last)>;
  virtual std::string settle_verdict(const Proposal& propose) { return propose(""); }

  // Straggler detection across nodes (agent/straggler/, docs/stragglers.md).
  // Every window each node stores its summary (one line, a few dozen bytes)
  // under a key of its own and gets back what group rank 0 last said of it
  // ("" nothing); group rank 0 reads every member's summary in one request
  // (by group rank, "" for one not in yet) and tells the nodes it names.
  // Where nothing is shared (local, static) nothing is stored or said, and
  // each node judges only its own ranks. Errors are logged, never thrown.
  virtual std::string exchange_speed(const std::string& summary) {
    (void)summary;
    return "";
  }
  virtual std::vector<std::string> node_speeds() { return {}; }
  virtual void tell_node(int group_rank, const std::string& verdict) {
    (void)group_rank;
    (void)verdict;
  }
  // --straggler-action=replace: when a spare waits to join, ends the round
  // with `join`, so that every member re-forms with it, and returns true;
  // this node then steps out (step_out) and the spare takes its place.
  // False when none waits, or where nodes cannot re-form.
  virtual bool call_spare() { return false; }

  // The job is over on this node. A node hosting the store keeps it up until
  // every member has left (bounded by close_timeout).
  virtual void leave(bool succeeded) = 0;
  // Between rounds, this node leaves the job for good (it failed a health
  // check) without ending it: the others re-form without it at once, with
  // a waiting spare in its place, or stop for too few nodes as for a dead
  // member (RendezvousLost), not after join_timeout. Backends that cannot
  // re-form have nothing to tell.
  virtual void step_out() {}
  // Before its first round, this node will not join (a failed health
  // check, `why` in one line): nodes waiting for that round learn it with
  // the reason, and when every place is taken or declined they wait for a
  // spare at most last_call_timeout before they stop (RendezvousLost), not
  // join_timeout. Never hosts the store and is bounded (kDeclineBound); a
  // store that is not up by then, or that this node was to host, cannot be
  // told. Logs, never throws. Backends that cannot re-form have nothing to
  // tell.
  virtual void decline(const std::string& why) { (void)why; }

  // The job board (rendezvous/job_board.h), what cxxrunctl reads: stores
  // this node's record, `node` its id for the agent's life, and returns the
  // job's stop request when one stands. Bounded by a short deadline of its
  // own; a store that does not answer is logged at debug level and returns
  // none (the board is a view, never a reason to fail). Backends with no
  // shared store (local, static) keep nothing and return none.
  virtual std::optional<board::StopRequest> publish_board(const std::string& node, const std::string& record) {
    (void)node;
    (void)record;
    return std::nullopt;
  }

  // cxxrunctl's requests (rendezvous/ctl_requests.h): delivers each one
  // made after this call, in order, from a thread of the backend's own,
  // with its number; the callee must only hand it to its loop. An empty
  // `on_request` stops watching: no call comes after it returns. Backends
  // with no shared store deliver none.
  using OnRequest = std::function<void(long long n, const std::string& request)>;
  virtual void watch_requests(OnRequest on_request) { (void)on_request; }

  // The agent is leaving because the store is gone, or holds a call past
  // the exit's grace (agent/supervisor.cc): a call in flight stops
  // reconnecting within a backoff step instead of waiting out read_timeout,
  // and so does every connection of the backend's, one a watch is still
  // making and the watchers' own included; later reconnects fail at once.
  // Any thread; nothing may be asked afterwards but what the agent's exit
  // does (the board's last record goes out on the connection it has, if
  // that is still up).
  virtual void abandon() {}
  // This node's answer to request `n` (at most requests::kMaxAnswerBytes),
  // under the board's short deadline. Logs, never throws.
  virtual void answer_request(long long n, const std::string& node, const std::string& answer) {
    (void)n;
    (void)node;
    (void)answer;
  }

  virtual void inject(const StoreFault& fault) = 0;
};

// make_rendezvous(), which picks a backend, is in backends.h: the seam
// knows none of them.

}  // namespace cxxrun::rendezvous
