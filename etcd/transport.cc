#include "etcd/transport.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <thread>

#include "etcd/backoff.h"
#include "etcd/errors.h"
#include "etcd/tls.h"
#include "etcd/wire.h"

namespace cxxrun::etcd {
namespace {

constexpr char kAuthenticate[] = "/etcdserverpb.Auth/Authenticate";
constexpr char kStatus[] = "/etcdserverpb.Maintenance/Status";
constexpr auto kLeaderPoll = std::chrono::milliseconds(50);
// The most a call waits for the others to elect a leader after losing a
// member: an election takes an election timeout or two (1 s by default). A
// member lost to a broken connection may still lead, and nothing else ends
// that wait but the call's deadline.
constexpr auto kLeaderWait = std::chrono::seconds(5);

bool contains(std::string_view text, std::string_view part) { return text.find(part) != std::string_view::npos; }

// The last failure of each endpoint within one call, for the message that
// ends it and for telling "none reachable" from "reachable but failing".
struct Failures {
  struct Entry {
    std::string reason;
    bool answered = false;  // the member answered (with a retryable refusal)
    bool permanent = false;
    bool tls = false;
  };
  explicit Failures(size_t n) : entries(n) {}
  std::vector<std::optional<Entry>> entries;

  bool all(bool Entry::*flag) const {
    for (const auto& e : entries)
      if (!e || !(*e.*flag)) return false;
    return true;
  }
  bool none_answered() const {
    for (const auto& e : entries)
      if (e && e->answered) return false;
    return true;
  }
  std::string list(const std::vector<Endpoint>& endpoints) const {
    std::string out;
    for (size_t i = 0; i < entries.size(); ++i)
      if (entries[i]) out += (out.empty() ? "" : "; ") + endpoints[i].text() + ": " + entries[i]->reason;
    return out;
  }
};

std::string prefix(const Endpoint& endpoint, std::string_view what) {
  return "etcd " + endpoint.text() + ": " + std::string(what) + ": ";
}

// Every endpoint failed in a way retrying cannot mend.
[[noreturn]] void throw_permanent(const Failures& failures, const std::vector<Endpoint>& endpoints,
                                  std::string_view what) {
  std::string message = endpoints.size() == 1
                            ? prefix(endpoints[0], what) + failures.entries[0]->reason
                            : "etcd: " + std::string(what) + ": every endpoint failed: " + failures.list(endpoints);
  if (failures.all(&Failures::Entry::tls)) throw EtcdTlsError(message);
  throw EtcdUnavailable(message);
}

}  // namespace

std::string format_duration(Clock::duration d) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  if (ms < 1000) return std::to_string(ms) + " ms";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", double(ms) / 1000);
  return buf;
}

Refusal classify(int grpc_code, std::string_view message) {
  if (contains(message, "invalid auth token") || contains(message, "auth store is old") ||
      contains(message, "user name is empty"))
    return Refusal::bad_token;
  if (contains(message, "authentication failed") || contains(message, "permission denied") || grpc_code == 7 ||
      grpc_code == 16)
    return Refusal::auth;
  for (auto safe : {"etcdserver: no leader", "etcdserver: not capable", "etcdserver: too many requests",
                    "etcdserver: leader changed", "etcdserver: unhealthy cluster"})
    if (contains(message, safe)) return Refusal::retry;
  // Unavailable (14) and deadline exceeded (4): the member may have
  // proposed the request before giving up on it. So may an overloaded
  // member that answers "context deadline exceeded" as Unknown (2): a
  // 10,000-agent rendezvous meets it (bench/etcd.py).
  if (grpc_code == 14 || grpc_code == 4 || (grpc_code == 2 && contains(message, "context deadline exceeded")))
    return Refusal::maybe_applied;
  return Refusal::final;
}

Transport::Transport(const Options& options)
    : options_(options),
      endpoints_(options.endpoints),
      member_ids_(endpoints_.size()) {
  if (endpoints_.empty()) throw EtcdError("etcd: no endpoints given");
  if (options.protocol == Protocol::https) {
    tls_ = std::make_shared<TlsContext>(TlsFiles{options.cacert, options.cert, options.key});
  } else if (!options.cacert.empty() || !options.cert.empty() || !options.key.empty()) {
    throw EtcdTlsError("etcd: cacert, cert and key need protocol https");
  }
  if (options.username.empty() != options.password.empty())
    throw EtcdAuthError("etcd: a username needs a password and a password a username");
}

Transport::~Transport() = default;

GrpcConnection& Transport::connection() {
  if (!connection_) connection_ = std::make_unique<GrpcConnection>(endpoints_[current_], tls_);
  return *connection_;
}

void Transport::move_on() {
  connection_.reset();
  current_ = (current_ + 1) % endpoints_.size();
}

std::string Transport::token(Clock::time_point deadline) {
  if (options_.username.empty()) return {};
  if (!token_) {
    try {
      token_ = wire::parse_token(
          call("authenticate", kAuthenticate, wire::authenticate_request(options_.username, options_.password),
               Repeat::always, deadline));
    } catch (const EtcdRequestError& e) {
      // Credentials for a cluster without auth: requests need no token.
      if (!contains(e.what(), "authentication is not enabled")) throw;
      token_ = std::string();
    }
  }
  return *token_;
}

void Transport::await_leader_other_than(std::string lost, int64_t lost_term, Clock::time_point deadline) {
  lost_member_.clear();  // first: the status calls below must not wait on themselves
  const auto until = std::min(deadline, Clock::now() + kLeaderWait);
  for (int polls = 0; Clock::now() < until; ++polls) {
    std::string leader;
    int64_t term = 0;
    try {
      // An empty StatusRequest.
      const std::string status = call("status", kStatus, std::string(), Repeat::always, until);
      leader = wire::parse_status_leader(status);
      term = wire::parse_raft_term(status);
    } catch (const EtcdError&) {
      return;  // the request itself will meet whatever this was, and say so
    }
    // Another leader, or the lost member elected again after it came back
    // (a restarted member may win the election its absence started).
    if (!leader.empty() && (leader != lost || (lost_term > 0 && term > lost_term))) {
      if (polls > 0) spdlog::debug("etcd {}: a new leader after {} polls", current().text(), polls);
      return;
    }
    std::this_thread::sleep_until(std::min(until, Clock::now() + kLeaderPoll));
  }
}

std::string Transport::call(std::string_view what, const std::string& method, const std::string& body, Repeat repeat,
                            Clock::time_point deadline) {
  auto started = Clock::now();
  Failures failures(endpoints_.size());
  Backoff backoff;
  size_t streak = 0;  // consecutive failures: a multiple of the member count is a full round
  bool authenticated_again = false;

  auto failed = [&](Failures::Entry entry) {
    const Endpoint& from = current();
    spdlog::debug("etcd {}: {}: {}; next: {}", from.text(), what, entry.reason,
                  endpoints_[(current_ + 1) % endpoints_.size()].text());
    if (!entry.answered && !member_ids_[current_].empty()) {
      lost_member_ = member_ids_[current_];
      lost_term_ = term_seen_;
    }
    // An attempt cut short by the deadline itself ("connect timed out")
    // says less about the member than the failure before it.
    auto& slot = failures.entries[current_];
    if (!slot || Clock::now() < deadline) slot = std::move(entry);
    if (failures.all(&Failures::Entry::permanent)) throw_permanent(failures, endpoints_, what);
    move_on();
    if (++streak % endpoints_.size() == 0) std::this_thread::sleep_until(backoff.next_wake(deadline));
  };

  while (true) {
    if (Clock::now() >= deadline) {
      auto spent = format_duration(Clock::now() - started);
      if (failures.none_answered() && streak > 0)
        throw EtcdUnavailable("etcd: " + std::string(what) + ": no member reachable in " + spent + ": " +
                              failures.list(endpoints_));
      throw EtcdTimeout("etcd: " + std::string(what) + ": no success in " + spent +
                        (streak > 0 ? " (" + failures.list(endpoints_) + ")" : ""));
    }
    if (!lost_member_.empty() && method != kStatus && method != kAuthenticate)
      await_leader_other_than(lost_member_, lost_term_, deadline);
    if (Clock::now() >= deadline) continue;
    const Endpoint& endpoint = current();
    GrpcResponse response;
    try {
      GrpcRequest request{method, body, method == kAuthenticate ? std::string() : token(deadline)};
      response = connection().call(request, deadline, Clock::now() + kConnectLimit);
    } catch (const TransportError& e) {
      if (e.kind == TransportError::Kind::timeout) {
        // Out of time on this member: the call ends, and the next one goes
        // to the next member. Kept, a member that takes requests and never
        // answers (stalled, restarting) would hold every later call too.
        move_on();
        throw EtcdTimeout(prefix(endpoint, what) + "no answer in " + format_duration(Clock::now() - started) +
                          (e.sent && repeat == Repeat::unsent ? "; it may or may not have been applied" : ""));
      }
      if (e.sent && repeat == Repeat::unsent) {
        connection_.reset();
        throw EtcdIndeterminate(prefix(endpoint, what) + e.what() +
                                "; the request had been sent, so it may or may not have been applied");
      }
      failed({e.what(), false, e.permanent, e.kind == TransportError::Kind::tls});
      continue;
    }
    if (response.status.code == 0) {
      if (auto id = wire::parse_member_id(response.message); !id.empty()) member_ids_[current_] = std::move(id);
      term_seen_ = std::max(term_seen_, wire::parse_raft_term(response.message));
      return std::move(response.message);
    }

    const std::string& message = response.status.message;
    const int code = response.status.code;
    switch (classify(code, message)) {
      case Refusal::bad_token:
        if (!options_.username.empty() && !authenticated_again && method != kAuthenticate) {
          authenticated_again = true;
          spdlog::debug("etcd {}: {}: {}; authenticating again", endpoint.text(), what, message);
          forget_token();
          continue;
        }
        throw EtcdAuthError(prefix(endpoint, what) + message +
                            (options_.username.empty() ? " (the cluster requires a username and password)" : ""));
      case Refusal::auth:
        throw EtcdAuthError(prefix(endpoint, what) + message);
      case Refusal::maybe_applied:
        if (repeat == Repeat::unsent)
          throw EtcdIndeterminate(prefix(endpoint, what) + message + "; it may or may not have been applied");
        [[fallthrough]];
      case Refusal::retry:
        failed({message, true, false, false});
        continue;
      case Refusal::final:
        throw EtcdRequestError(prefix(endpoint, what) + message, code);
    }
  }
}

}  // namespace cxxrun::etcd
