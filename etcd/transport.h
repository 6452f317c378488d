// The failover and authentication rules of every unary call: one member at
// a time, the next on a failure, round and round with backoff until the
// call's deadline. Internal to etcd/; Client is its user, Watch borrows its
// endpoints, TLS context and token.
//
// Which failures move on and retry:
// - nothing was sent (resolve, connect, TLS handshake broke off, a kept-alive
//   connection found closed before use): any request;
// - the member answered that it cannot serve now without having applied
//   anything ("no leader", "not capable", "too many requests", "leader
//   changed", "unhealthy cluster"): any request;
// - the request went out and the answer was lost, or the member answered
//   "request timed out"/"server stopped" (the proposal may still commit):
//   only a request marked Repeat::always (reads, keep-alive, revoke). A
//   write then throws EtcdIndeterminate (EtcdTimeout at the deadline).
// A call whose deadline passes while a member holds it ends there
// (EtcdTimeout), and the next call starts at the next member.
// After a member becomes unreachable, the next request first asks the
// member it moves to whom it follows (/v3/maintenance/status) and waits,
// within the deadline, while that is still the lost member: a follower
// notices a dead leader only after the election timeout, and until then it
// takes a request, forwards it into the void and holds it until etcd's own
// request timeout (7 s) before answering "request timed out", which for a
// write means "unknown". Waiting for the new leader (about 1 s) instead
// keeps the write determinate. Member ids come from each answer's header.
// Every request asks the member to refuse at once when it has no leader
// (metadata hasleader, as etcd's clients' WithRequireLeader), so a
// member cut off from its peers answers "no leader" instead of holding the
// request until etcd's own 7 s timeout.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "etcd/grpc_connection.h"
#include "etcd/options.h"

namespace cxxrun::etcd {

class TlsContext;

class Transport {
 public:
  enum class Repeat {
    always,  // the same request twice has the effect of once (or is harmless)
    unsent,  // only if the first never reached a member
  };

  // Loads the TLS files; connects to nothing yet. Throws EtcdError (no
  // endpoint) or EtcdTlsError (a file).
  explicit Transport(const Options& options);
  ~Transport();

  // Calls gRPC `method` ("/etcdserverpb.KV/Put") with the serialized
  // request `body` and returns the serialized answer. `what` names the
  // operation in messages ("put"). Throws the errors.h classes.
  std::string call(std::string_view what, const std::string& method, const std::string& body, Repeat repeat,
                   Clock::time_point deadline);

  // The auth token to send, authenticating first when there is none yet;
  // empty without credentials (or when the cluster has auth disabled).
  std::string token(Clock::time_point deadline);
  // The token was refused as expired or invalid: the next token() asks anew.
  void forget_token() { token_.reset(); }

  const Options& options() const { return options_; }
  Options& options() { return options_; }
  const std::vector<Endpoint>& endpoints() const { return endpoints_; }
  const std::shared_ptr<TlsContext>& tls() const { return tls_; }
  // The member the next request goes to.
  const Endpoint& current() const { return endpoints_[current_]; }

 private:
  GrpcConnection& connection();
  void move_on();
  void await_leader_other_than(std::string lost, int64_t lost_term, Clock::time_point deadline);

  Options options_;
  std::vector<Endpoint> endpoints_;
  std::shared_ptr<TlsContext> tls_;
  size_t current_ = 0;
  std::unique_ptr<GrpcConnection> connection_;  // to endpoints_[current_]
  std::optional<std::string> token_;            // empty string: none needed
  std::vector<std::string> member_ids_;         // of each endpoint, from its answers
  std::string lost_member_;                     // id of a member that just became unreachable
  int64_t term_seen_ = 0;                       // the highest raft term answers named
  int64_t lost_term_ = 0;                       // term_seen_ when lost_member_ was lost
};

// How a member's refusal is to be handled; shared with Watch, whose stream
// carries the same statuses.
enum class Refusal {
  retry,         // not applied; another member (or later) may serve it
  maybe_applied, // unavailable, but a write may still commit
  bad_token,     // expired or unknown token: authenticate again
  auth,          // credentials or permissions: EtcdAuthError
  final,         // anything else: EtcdRequestError
};
// `grpc_code` is the answer's gRPC status (GrpcConnection maps an HTTP
// status that is not 200 to one).
Refusal classify(int grpc_code, std::string_view message);

// Hard cap on connecting to one member (resolve, TCP, TLS), so a member that
// drops packets cannot spend the whole deadline before the next is tried.
inline constexpr std::chrono::seconds kConnectLimit{3};

// "1.5 s", "250 ms": how messages give a duration.
std::string format_duration(Clock::duration d);

}  // namespace cxxrun::etcd
