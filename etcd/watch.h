// A watch on one key or one prefix, over a streaming connection of its own
// (etcd's gRPC Watch call: one stream of messages on an HTTP/2 connection).
//
// Promises: events come in revision order, each exactly once, across member
// failures: when the stream breaks, the watch is created again on the next
// member from the last delivered revision + 1. If that revision has been
// compacted away it cannot be, and next() throws EtcdCompacted. next()
// waits no longer than its deadline; cancel(), from any thread, makes a
// blocked next() return nullopt at once, and every later one too.
//
// Thread rule: one thread calls next() (and the accessors); cancel() may be
// called from any other while the Watch exists.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "etcd/errors.h"
#include "etcd/options.h"
#include "etcd/types.h"

namespace cxxrun::etcd {

class Watch {
 public:
  using Clock = std::chrono::steady_clock;
  // prefix_and_prev: a prefix, each event with the key as it was before
  // (WatchEvent::prev: a DELETE's create revision).
  enum class Scope { key, prefix, prefix_and_prev };

  // Creates the watch on the first member that takes it, within
  // options.timeout; throws as Client's calls do when none does.
  // start_revision 0: events after the revision current at creation;
  // otherwise events from that revision on (history, if not compacted).
  Watch(const Options& options, std::string key, Scope scope = Scope::key, int64_t start_revision = 0);
  ~Watch();
  Watch(const Watch&) = delete;
  Watch& operator=(const Watch&) = delete;

  // The next batch of events (never empty), or nullopt when the deadline
  // passes first or the watch was cancelled (a deadline already passed:
  // what has arrived, without waiting). While no member can be
  // reached it keeps trying; after options.timeout of that it throws
  // EtcdUnavailable naming each member and why.
  std::optional<std::vector<WatchEvent>> next(Clock::time_point deadline);
  std::optional<std::vector<WatchEvent>> next(std::chrono::milliseconds timeout);

  // Ends the stream and keeps its connection for restart(): a watch whose
  // owner has no use for its events for a while (an agent re-joining) stops
  // costing the member a stream. A next() before restart() makes the stream
  // again, from where it stopped.
  void stop();
  // Watches `key` instead, as a new Watch(options, key, scope,
  // start_revision) would with `timeout` as the options' timeout, but on the
  // connection the last stream used where it is still live: a new stream,
  // not a new connection. Each of 10,000 agents re-joining opened one, and
  // the members spent a large share of the recovery accepting them
  // (bench/RESULTS.md). Throws as the constructor does; a cancelled watch
  // stays cancelled.
  void restart(std::string key, Scope scope, int64_t start_revision, std::chrono::milliseconds timeout);

  // How long a broken stream is made again before next() throws; the
  // creation's options.timeout until set. A watch kept across a caller's
  // short waits (the store's slices between two keep-alives) needs the
  // caller's whole patience here, not the first wait's remainder: etcd
  // without a leader for longer than that ended a 10,000-agent rendezvous.
  void set_timeout(std::chrono::milliseconds timeout);

  // Any thread. Idempotent.
  void cancel();
  bool cancelled() const;

  // Every event up to this revision has been delivered (the creation
  // revision before any has).
  int64_t revision() const;
  // The member the stream is on, "host:port"; empty while reconnecting.
  std::string endpoint() const;
  // How many times the stream was created (1 + reconnections) since the
  // creation or the last restart().
  int connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cxxrun::etcd
