// Watch: the stream, its resumption on another member, and cancellation.
// The connection is swapped only under `mutex`, so cancel() from another
// thread always interrupts the connection in use (or finds the flag set
// before the next one is made).
#include "etcd/watch.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>

#include "etcd/backoff.h"
#include "etcd/grpc_connection.h"
#include "etcd/transport.h"
#include "etcd/wire.h"

namespace cxxrun::etcd {
namespace {

constexpr char kWatch[] = "/etcdserverpb.Watch/Watch";

}  // namespace

struct Watch::Impl {
  Impl(const Options& options, std::string k, Scope scope, int64_t start)
      : transport(options), reasons(transport.endpoints().size()), permanent(reasons.size(), 0) {
    aim(std::move(k), scope, start);
  }

  // What to watch, from where: the creation's, or restart()'s.
  void aim(std::string k, Scope scope, int64_t start) {
    key = std::move(k);
    range_end.clear();
    prev_kv = scope == Scope::prefix_and_prev;
    if (scope != Scope::key) {
      Op op = Op::get_prefix(key);
      key = op.key;
      range_end = op.range_end;
    }
    start_revision = start;
    last = start > 0 ? start - 1 : 0;
    known = start > 0;
    connected = false;
    connections = 0;
    broken_since = Clock::now();  // "not yet connected" ends in a throw at the creation's deadline
    reasons.assign(reasons.size(), std::nullopt);
    permanent.assign(permanent.size(), 0);
    any_answered = false;
    streak = 0;
    backoff = Backoff();
  }

  // Creates the watch within the options' timeout, as the constructor
  // promises; quietly nothing when cancelled.
  void create() {
    if (establish(Clock::now() + transport.options().timeout) || cancelled) return;
    throw EtcdTimeout(name() + ": not created in " + format_duration(transport.options().timeout) +
                      (failures().empty() ? "" : ": " + failures()));
  }

  Transport transport;  // endpoints, TLS and token; its own requests only authenticate
  std::string key;
  std::string range_end;
  int64_t start_revision;
  bool prev_kv = false;
  int64_t last = 0;    // every event up to here has been delivered
  bool known = false;  // false: "from now", until the first creation says when now was
  size_t current = 0;
  bool connected = false;  // the stream on `connection` is created and live
  int connections = 0;
  std::unique_ptr<GrpcConnection> connection;
  std::optional<Clock::time_point> broken_since;
  std::vector<std::optional<std::string>> reasons;  // each member's last failure, for EtcdUnavailable
  std::vector<int> permanent;  // each member's last failure: 0 transient, 1 permanent, 2 TLS (permanent)
  bool any_answered = false;
  Backoff backoff;
  size_t streak = 0;
  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<bool> cancelled{false};

  std::string name() const { return "etcd watch on '" + key + "'"; }
  const Endpoint& member() const { return transport.endpoints()[current]; }

  void install(std::unique_ptr<GrpcConnection> c) {
    std::lock_guard lock(mutex);
    connection = std::move(c);
    if (cancelled && connection) connection->interrupt();
  }

  void sleep_until(Clock::time_point t) {
    std::unique_lock lock(mutex);
    wake.wait_until(lock, t, [&] { return cancelled.load(); });
  }

  std::string failures() const {
    std::string out;
    for (size_t i = 0; i < reasons.size(); ++i)
      if (reasons[i]) out += (out.empty() ? "" : "; ") + transport.endpoints()[i].text() + ": " + *reasons[i];
    return out;
  }

  // This member failed: the next one, after a pause once all have.
  void move_on(const std::string& reason, Clock::time_point deadline) {
    spdlog::debug("{}: {}: {}", name(), member().text(), reason);
    if (!reasons[current] || Clock::now() < deadline) reasons[current] = reason;  // as in transport.cc
    install(nullptr);
    connected = false;
    if (!broken_since) broken_since = Clock::now();
    current = (current + 1) % reasons.size();
    if (++streak % reasons.size() == 0) sleep_until(backoff.next_wake(deadline));
  }

  [[noreturn]] void compacted(const wire::WatchMessage& m) {
    throw EtcdCompacted(name() + ": revision " + std::to_string(last + 1) + " was compacted (the oldest kept is " +
                            std::to_string(m.compact_revision) + "); read the state again and start a new watch",
                        m.compact_revision);
  }

  // A member's refusal (a call refused at once, or a stream it ended with a
  // status). True: try the same member again (with a fresh token); false:
  // move on.
  bool refused(const GrpcStatus& error, bool& authenticated_again) {
    switch (classify(error.code, error.message)) {
      case Refusal::bad_token:
        if (!transport.options().username.empty() && !authenticated_again) {
          authenticated_again = true;
          transport.forget_token();
          return true;
        }
        [[fallthrough]];
      case Refusal::auth:
        throw EtcdAuthError("etcd " + member().text() + ": watch: " + error.message +
                            (transport.options().username.empty() ? " (the cluster requires a username and password)"
                                                                  : ""));
      case Refusal::retry:
      case Refusal::maybe_applied:
        any_answered = true;
        return false;
      case Refusal::final:
        break;
    }
    throw EtcdRequestError("etcd " + member().text() + ": watch: " + error.message, error.code);
  }

  // Creates the watch on the current member or the ones after it. False
  // when the deadline passed first, or on cancel().
  bool establish(Clock::time_point deadline) {
    bool authenticated_again = false;
    while (!cancelled) {
      auto now = Clock::now();
      if (broken_since && now - *broken_since >= transport.options().timeout) {
        auto spent = format_duration(now - *broken_since);
        if (any_answered) throw EtcdTimeout(name() + ": not re-established in " + spent + ": " + failures());
        throw EtcdUnavailable(name() + ": no member reachable in " + spent + ": " + failures());
      }
      if (now >= deadline) return false;
      // The connection of a stream that ended well (stop(), restart(), a
      // refusal to try again) carries the next; one that failed is gone.
      if (!connection) install(std::make_unique<GrpcConnection>(member(), transport.tls()));
      try {
        int64_t from = known ? last + 1 : start_revision;
        GrpcRequest request{kWatch, wire::watch_create_request(key, range_end, from, prev_kv), transport.token(deadline)};
        auto answer = connection->open_stream(request, deadline, now + kConnectLimit);
        if (answer.status.code != 0) {
          if (refused(answer.status, authenticated_again)) continue;
          move_on(answer.status.message, deadline);
          continue;
        }
        if (await_created(deadline, authenticated_again)) return true;
        if (Clock::now() >= deadline || cancelled) {
          install(nullptr);  // a creation half done: start it again next time
          return false;
        }
      } catch (const TransportError& e) {
        if (e.kind == TransportError::Kind::cancelled) return false;
        // The member ended the stream with a refusal before confirming it
        // (one that ended it with OK, going down, broke it like a reset).
        if (e.status && e.status->code != 0) {
          if (refused(*e.status, authenticated_again)) continue;
          move_on(e.status->message, deadline);
          continue;
        }
        // The caller's deadline cut the attempt short (a connect given the
        // last millisecond of a wait's slice): its time ran out, which says
        // nothing of the member. Counted as a failed member, it made a
        // rendezvous over etcd fail its join with "no member reachable in
        // 1 ms" (bench/etcd.py --only recover, 1,000 agents).
        if (e.kind == TransportError::Kind::timeout || (!e.permanent && Clock::now() >= deadline)) {
          install(nullptr);
          return false;
        }
        permanent[current] = e.permanent ? (e.kind == TransportError::Kind::tls ? 2 : 1) : 0;
        if (std::all_of(permanent.begin(), permanent.end(), [](int p) { return p > 0; })) {
          reasons[current] = e.what();
          std::string why = reasons.size() == 1 ? "etcd " + member().text() + ": watch: " + e.what()
                                                : name() + ": every endpoint failed: " + failures();
          if (std::all_of(permanent.begin(), permanent.end(), [](int p) { return p == 2; })) throw EtcdTlsError(why);
          throw EtcdUnavailable(why);
        }
        move_on(e.what(), deadline);
      }
    }
    return false;
  }

  // Reads the stream until the member confirms the watch. False on the
  // deadline, or after a refusal (the caller moves on or retries).
  bool await_created(Clock::time_point deadline, bool& authenticated_again) {
    while (true) {
      std::string bytes;
      if (!connection->read_message(bytes, deadline)) return false;
      {
        auto m = parse(bytes);
        if (m.kind == wire::WatchMessage::Kind::canceled) {
          const GrpcStatus refusal = cancellation(m);
          if (!refused(refusal, authenticated_again)) move_on(refusal.message, deadline);
          return false;
        }
        if (m.kind != wire::WatchMessage::Kind::created) continue;
        if (!known) {
          last = m.revision;
          known = true;
        }
        if (connections++ > 0)
          spdlog::info("{}: resumed on {} from revision {}", name(), member().text(), last + 1);
        connected = true;
        broken_since.reset();
        reasons.assign(reasons.size(), std::nullopt);
        permanent.assign(permanent.size(), 0);
        any_answered = false;
        streak = 0;
        backoff = Backoff();
        return true;
      }
    }
  }

  // A cancellation by the member is compaction (final for this watch: it
  // throws here) or a refusal like any other ("user name is empty",
  // "permission denied"), which cancellation() words for refused() to judge.
  wire::WatchMessage parse(const std::string& message) {
    wire::WatchMessage m;
    try {
      m = wire::parse_watch_message(message);
    } catch (const wire::Malformed& e) {
      throw EtcdError("etcd " + member().text() + ": watch: " + e.what());
    }
    if (m.kind == wire::WatchMessage::Kind::canceled && m.compact_revision > 0) compacted(m);
    return m;
  }

  static GrpcStatus cancellation(const wire::WatchMessage& m) { return {0, "cancelled: " + m.cancel_reason}; }

  // The events of one message not delivered before (a resumed stream
  // starts after `last`, so this drops nothing etcd sends; it is the guard
  // that makes "exactly once" not depend on that).
  std::vector<WatchEvent> fresh(std::vector<WatchEvent> events) {
    std::vector<WatchEvent> out;
    for (auto& e : events)
      if (e.kv.mod_revision > last) out.push_back(std::move(e));
    for (const auto& e : out) last = std::max(last, e.kv.mod_revision);
    return out;
  }

  std::optional<std::vector<WatchEvent>> next(Clock::time_point deadline) {
    bool authenticated_again = false;
    while (!cancelled) {
      if (!connected) {
        if (!establish(deadline)) return std::nullopt;
        continue;
      }
      std::string bytes;
      try {
        if (!connection->read_message(bytes, deadline)) return std::nullopt;
      } catch (const TransportError& e) {
        if (e.kind == TransportError::Kind::cancelled) return std::nullopt;
        if (e.status && e.status->code != 0) {
          // e.g. "no leader": this member lost its peers; resume elsewhere.
          refused(*e.status, authenticated_again);
          spdlog::info("{}: {} ended the stream: {}", name(), member().text(), e.status->message);
          move_on(e.status->message, deadline);
          continue;
        }
        spdlog::info("{}: the stream from {} broke ({}); resuming from revision {}", name(), member().text(),
                     e.what(), last + 1);
        move_on(e.what(), deadline);
        continue;
      }
      auto m = parse(bytes);
      switch (m.kind) {
        case wire::WatchMessage::Kind::events:
          if (auto events = fresh(std::move(m.events)); !events.empty()) return events;
          break;
        case wire::WatchMessage::Kind::progress:
          last = std::max(last, m.revision);
          break;
        case wire::WatchMessage::Kind::created:
          break;
        case wire::WatchMessage::Kind::canceled: {
          const GrpcStatus refusal = cancellation(m);
          refused(refusal, authenticated_again);
          spdlog::info("{}: {} ended the watch: {}", name(), member().text(), refusal.message);
          move_on(refusal.message, deadline);
          break;
        }
      }
    }
    return std::nullopt;
  }
};

Watch::Watch(const Options& options, std::string key, Scope scope, int64_t start_revision)
    : impl_(std::make_unique<Impl>(options, std::move(key), scope, start_revision)) {
  impl_->create();
}

void Watch::stop() {
  if (impl_->connection) impl_->connection->end_stream();
  impl_->connected = false;
}

void Watch::restart(std::string key, Scope scope, int64_t start_revision, std::chrono::milliseconds timeout) {
  stop();
  impl_->transport.options().timeout = timeout;
  impl_->aim(std::move(key), scope, start_revision);
  impl_->create();
}

Watch::~Watch() = default;

std::optional<std::vector<WatchEvent>> Watch::next(Clock::time_point deadline) { return impl_->next(deadline); }

std::optional<std::vector<WatchEvent>> Watch::next(std::chrono::milliseconds timeout) {
  return impl_->next(Clock::now() + timeout);
}

void Watch::set_timeout(std::chrono::milliseconds timeout) { impl_->transport.options().timeout = timeout; }

void Watch::cancel() {
  impl_->cancelled = true;
  std::lock_guard lock(impl_->mutex);
  if (impl_->connection) impl_->connection->interrupt();
  impl_->wake.notify_all();
}

bool Watch::cancelled() const { return impl_->cancelled; }
int64_t Watch::revision() const { return impl_->last; }
std::string Watch::endpoint() const { return impl_->connected ? impl_->member().text() : std::string(); }
int Watch::connections() const { return impl_->connections; }

}  // namespace cxxrun::etcd
