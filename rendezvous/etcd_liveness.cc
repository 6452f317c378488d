#include "rendezvous/etcd_liveness.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <optional>

#include "etcd/client.h"
#include "etcd/watch.h"
#include "rendezvous/etcd_errors.h"
#include "rendezvous/etcd_store.h"
#include "store/client.h"

namespace cxxrun::rendezvous {
namespace {

using std::chrono::milliseconds;

int64_t ttl_of(const RendezvousSettings& s) {
  const auto ms = (s.keep_alive_interval * s.keep_alive_max_attempt).count();
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(ms / 1000.0)));
}

// The slot at the end of an alive key, -1 if it is not one.
int slot_of(const std::string& key, const std::string& prefix) {
  if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0) return -1;
  int slot = -1;
  auto [end, ec] = std::from_chars(key.data() + prefix.size(), key.data() + key.size(), slot);
  return ec == std::errc() && end == key.data() + key.size() ? slot : -1;
}

// The algorithm above speaks the store's errors.
template <typename F>
auto in_store_terms(const char* what, F&& call) {
  try {
    return call();
  } catch (const etcd::EtcdError&) {
    rethrow_as_store_error(what);
  }
}

}  // namespace

EtcdLiveness::EtcdLiveness(const RendezvousSettings& settings, etcd::Client& client, std::string key_prefix)
    : etcd_(settings.etcd),
      key_prefix_(std::move(key_prefix)),
      ttl_seconds_(ttl_of(settings)),
      interval_(settings.keep_alive_interval),
      // A beat must not outlast its interval, or a slow member stalls the next.
      call_timeout_(std::max(milliseconds(500), settings.keep_alive_interval)),
      // Joining is a step of the rendezvous, with its deadline: a thousand
      // nodes joining at once may keep etcd busy longer than a beat may take.
      read_timeout_(settings.read_timeout),
      client_(client) {}

EtcdLiveness::~EtcdLiveness() = default;

// A grant etcd may or may not have made is asked again: a lease made twice
// holds no key and lapses after its TTL.
void EtcdLiveness::grant(milliseconds timeout) {
  resend_while_indeterminate(std::chrono::steady_clock::now() + timeout, [&](milliseconds t) {
    const auto sent = std::chrono::steady_clock::now();
    const etcd::Lease lease = client_.lease_grant(ttl_seconds_, t);
    lease_ = lease.id;
    holds_until_ = sent + std::chrono::seconds(lease.ttl);
  });
}

bool EtcdLiveness::keep_alive(milliseconds timeout) {
  const auto sent = std::chrono::steady_clock::now();
  const int64_t ttl = lease_ == 0 ? 0 : client_.lease_keep_alive(lease_, timeout);
  if (ttl > 0) holds_until_ = sent + std::chrono::seconds(ttl);
  return ttl > 0;
}

void EtcdLiveness::renew(milliseconds timeout) {
  if (!keep_alive(timeout)) grant(timeout);
}

bool EtcdLiveness::lease_holds() const {
  return lease_ != 0 && holds_until_ - std::chrono::steady_clock::now() > interval_ * 3 / 2;
}

std::string EtcdLiveness::slot_key(const std::string& round_prefix, int slot) const {
  char digits[16];
  snprintf(digits, sizeof digits, "%010d", slot);
  return round_prefix + digits;
}

bool EtcdLiveness::joining(const std::string& alive_prefix, int slot, const std::string& descriptor_key,
                           const std::string& descriptor) {
  // The last round's members are no news to a node joining the next: a
  // lease lapsing among thousands re-joining is not pushed to this one.
  stop_watching();
  return in_store_terms("cannot hold a lease on etcd", [&] {
    // A lease renewed moments ago (the rendezvous beats before each step)
    // is not renewed again: at 1,000 agents re-joining at once that was a
    // request in ten.
    bool renewed = !lease_holds();
    if (renewed) renew(read_timeout_);
    alive_key_ = slot_key(key_prefix_ + alive_prefix, slot);
    const auto write = [&] {
      // Both at once: the alive key is never after the descriptor, and a
      // join is one write of etcd's, not two.
      const std::vector<etcd::Op> both{etcd::Op::put(alive_key_, "", lease_),
                                       etcd::Op::put(key_prefix_ + descriptor_key, descriptor)};
      resend_while_indeterminate(std::chrono::steady_clock::now() + read_timeout_,
                                 [&](milliseconds t) { client_.txn({}, both, {}, t); });
    };
    try {
      write();
    } catch (const etcd::EtcdRequestError& e) {
      // The lease it took to hold is gone after all (revoked, or etcd's
      // clock ran ahead): etcd refuses a put on it. A new one, and again.
      if (renewed) throw;
      spdlog::debug("etcd refused this node's alive key ({}); renewing its lease", e.what());
      renew(read_timeout_);
      renewed = true;
      write();
    }
    return renewed;
  });
}

etcd::CountResult EtcdLiveness::count_slots(const std::string& prefix, int members, milliseconds timeout) {
  return in_store_terms("cannot read the members' leases", [&] {
    return client_.count(slot_key(prefix, 0), slot_key(prefix, members), timeout);
  });
}

std::pair<int64_t, std::set<int>> EtcdLiveness::read_dead(const std::string& prefix, int members,
                                                           milliseconds timeout) {
  const auto counted = count_slots(prefix, members, timeout);
  std::set<int> dead;
  if (counted.count >= members) return {counted.revision, dead};
  const auto present = in_store_terms("cannot read the members' leases", [&] {
    return client_.range_keys(slot_key(prefix, 0), slot_key(prefix, members), timeout);
  });
  std::set<int> alive;
  for (const auto& kv : present.kvs) alive.insert(slot_of(kv.key, prefix));
  for (int slot = 0; slot < members; ++slot)
    if (!alive.count(slot)) dead.insert(slot);
  return {present.revision, dead};
}

// Every member wrote its key before its slot was known to anyone, so a key
// missing once all descriptors are in is a member already gone. etcd counts
// a range key by key: one snapshot by the assigner, not one per member, or
// a round of N costs N^2.
std::string EtcdLiveness::snapshot(const std::string& alive_prefix, int members) {
  auto [revision, dead] = read_dead(key_prefix_ + alive_prefix, members, read_timeout_);
  std::string out = std::to_string(revision);
  for (int slot : dead) out += (out.find(':') == std::string::npos ? ":" : ",") + std::to_string(slot);
  return out;
}

namespace {

// A snapshot's revision and dead slots; nullopt if `text` is not one.
std::optional<std::pair<int64_t, std::set<int>>> parse_snapshot(const std::string& text) {
  const auto colon = text.find(':');
  int64_t revision = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + std::min(colon, text.size()), revision);
  if (ec != std::errc() || end != text.data() + std::min(colon, text.size()) || revision <= 0) return std::nullopt;
  std::set<int> dead;
  for (size_t at = colon; at != std::string::npos && at < text.size();) {
    const size_t from = at + 1, comma = text.find(',', from);
    const size_t to = comma == std::string::npos ? text.size() : comma;
    int slot = -1;
    auto [e, err] = std::from_chars(text.data() + from, text.data() + to, slot);
    if (err != std::errc() || e != text.data() + to || slot < 0) return std::nullopt;
    dead.insert(slot);
    at = comma;
  }
  return std::make_pair(revision, dead);
}

}  // namespace

void EtcdLiveness::joined(const std::string& alive_prefix, int members, const std::string& snapshot) {
  stop_watching();
  watched_ = key_prefix_ + alive_prefix;
  members_ = members;
  auto taken = parse_snapshot(snapshot);
  if (!taken) taken = read_dead(watched_, members, read_timeout_);
  dead_ = taken->second;
  // From the revision after the snapshot: a member gone since is an event.
  resume_from_ = taken->first + 1;
  rewatch(read_timeout_);
}

void EtcdLiveness::open_watch(int64_t from, milliseconds timeout) {
  if (auto reused = std::move(stopped_)) {
    reused->restart(watched_, etcd::Watch::Scope::prefix, from, timeout);
    watch_ = std::move(reused);
  } else {
    watch_ = std::make_unique<etcd::Watch>(etcd_options(etcd_, timeout), watched_, etcd::Watch::Scope::prefix, from);
  }
}

void EtcdLiveness::rewatch(milliseconds timeout) {
  if (resume_from_ == 0) return resync(timeout);
  try {
    open_watch(resume_from_, timeout);
  } catch (const etcd::EtcdCompacted& e) {
    resync(timeout);
  } catch (const etcd::EtcdError& e) {
    spdlog::warn("cannot watch the members' leases on etcd (trying again): {}", e.what());
  }
}

void EtcdLiveness::resync(milliseconds timeout) {
  spdlog::warn("the members' leases changed further back than etcd keeps history; reading them again");
  try {
    open_watch(0, timeout);
    dead_ = read_dead(watched_, members_, timeout).second;
  } catch (const std::exception& e) {  // etcd's errors, or the store's from read_dead
    watch_.reset();
    resume_from_ = 0;  // the next try starts from now as well
    spdlog::warn("cannot watch the members' leases on etcd (trying again): {}", e.what());
  }
}

void EtcdLiveness::beat() {
  if (lease_ == 0) return;
  if (in_store_terms("lease keep-alive", [&] { return keep_alive(call_timeout_); })) return;
  // The lease expired (this node or etcd stalled past its TTL): the others
  // may already count this node dead and re-form; it stays in the job it
  // is told of, under a new lease.
  spdlog::warn("this node's lease on etcd expired; taking a new one");
  in_store_terms("cannot renew this node's lease", [&] {
    grant(call_timeout_);
    if (!alive_key_.empty()) client_.put(alive_key_, "", lease_, call_timeout_);
  });
}

std::vector<int> EtcdLiveness::dead_slots() {
  // A stream that broke is made again with a call's time. Left to next()'s
  // 2 ms, each check started a connect and gave it up, and on a loaded
  // machine every one did: the DELETE came only once the watch's own timeout
  // (read_timeout) ran out.
  if (watch_ && watch_->endpoint().empty()) {
    resume_from_ = watch_->revision() + 1;
    watch_.reset();
  }
  if (!watched_.empty() && !watch_) rewatch(call_timeout_);
  if (watch_) {
    try {
      // Only what has arrived: the DELETEs are pushed, never polled for.
      // A moment to read what the socket holds; a deadline already past reads nothing.
      while (auto events = watch_->next(milliseconds(2))) {
        for (const auto& e : *events) {
          const int slot = slot_of(e.kv.key, watched_);
          if (slot < 0) continue;
          if (e.type == etcd::WatchEvent::Type::del) dead_.insert(slot);
          else dead_.erase(slot);
        }
      }
    } catch (const etcd::EtcdCompacted& e) {
      resync(call_timeout_);
    } catch (const etcd::EtcdError& e) {
      resume_from_ = watch_->revision() + 1;
      watch_.reset();
      spdlog::warn("the watch on the members' leases broke (resuming from revision {}): {}", resume_from_, e.what());
    }
  }
  return {dead_.begin(), dead_.end()};
}

int EtcdLiveness::count_alive(const std::string& alive_prefix, int members) {
  return static_cast<int>(count_slots(key_prefix_ + alive_prefix, members, call_timeout_).count);
}

void EtcdLiveness::stop_watching(bool for_good) {
  if (for_good) stopped_.reset();
  else if (watch_) (stopped_ = std::move(watch_))->stop();
  watch_.reset();
  watched_.clear();
  dead_.clear();
}

void EtcdLiveness::release() {
  // Closed first: the revokes of a whole job leaving at once are not
  // pushed to every member that is leaving too.
  stop_watching(true);
  if (lease_ == 0) return;
  try {
    client_.lease_revoke(lease_, call_timeout_);
  } catch (const etcd::EtcdError& e) {
    spdlog::debug("cannot revoke this node's lease: {}", e.what());
  }
  lease_ = 0;
}

}  // namespace cxxrun::rendezvous
