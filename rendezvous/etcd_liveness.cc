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
#include "rendezvous/etcd_roster.h"
#include "rendezvous/etcd_store.h"
#include "store/client.h"

namespace cxxrun::rendezvous {
namespace {

using std::chrono::milliseconds;

int64_t ttl_of(const RendezvousSettings& s) {
  const auto ms = (s.keep_alive_interval * s.keep_alive_max_attempt).count();
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(ms / 1000.0)));
}

// The name at the end of an alive key under `prefix`, empty if it is not one.
std::string name_of(const std::string& key, const std::string& prefix) {
  if (key.size() <= prefix.size() || key.compare(0, prefix.size(), prefix) != 0) return "";
  return key.substr(prefix.size());
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

EtcdLiveness::EtcdLiveness(const RendezvousSettings& settings, EtcdStore& store)
    : etcd_(settings.etcd),
      key_prefix_(store.etcd_key("")),
      ttl_seconds_(ttl_of(settings)),
      interval_(settings.keep_alive_interval),
      // A beat must not outlast its interval, or a slow member stalls the next.
      call_timeout_(std::max(milliseconds(500), settings.keep_alive_interval)),
      // Joining is a step of the rendezvous, with its deadline: a thousand
      // nodes joining at once may keep etcd busy longer than a beat may take.
      read_timeout_(settings.read_timeout),
      store_(store),
      client_(store.client()) {}

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

bool EtcdLiveness::joining(const std::string& alive_prefix, store::StoreClient::Join& join) {
  // The last round's members are no news to a node joining the next: a
  // lease lapsing among thousands re-joining is not pushed to this one.
  stop_watching();
  return in_store_terms("cannot hold a lease on etcd", [&] {
    // A lease renewed moments ago (the rendezvous beats before each step)
    // is not renewed again: at 1,000 agents re-joining at once that was a
    // request in ten.
    const bool renewed = !lease_holds();
    if (renewed) renew(read_timeout_);
    join.alive_prefix = alive_prefix;
    join.lease = lease_;
    // The lease it took to hold is gone after all (revoked, or etcd's clock
    // ran ahead): etcd refuses the join's put on it. A new one, and again.
    join.lease_gone = [this] {
      spdlog::debug("etcd refused this node's alive key; renewing its lease");
      in_store_terms("cannot hold a lease on etcd", [&] { renew(read_timeout_); });
      return lease_;
    };
    return renewed;
  });
}

void EtcdLiveness::took(const std::string& alive_key) { alive_key_ = key_prefix_ + alive_key; }

void EtcdLiveness::spare() {
  if (alive_key_.empty()) return;
  try {
    client_.delete_range(alive_key_, call_timeout_);
  } catch (const etcd::EtcdError& e) {
    spdlog::debug("cannot delete this spare's alive key: {}", e.what());
  }
  alive_key_.clear();
}

std::pair<int64_t, std::set<int>> EtcdLiveness::read_dead(const EtcdRoster& roster, const std::string& prefix,
                                                           int members, milliseconds timeout) {
  // The keys alone (no values): a round of N costs one answer of N names.
  const auto present = in_store_terms("cannot read the members' leases", [&] {
    return client_.range_keys(prefix, etcd::prefix_range_end(prefix), timeout);
  });
  std::set<std::string> alive;
  for (const auto& kv : present.kvs) alive.insert(name_of(kv.key, prefix));
  std::set<int> dead;
  for (int slot = 0; slot < members && slot < static_cast<int>(roster.joiners.size()); ++slot)
    if (!alive.count(roster.joiners[slot].name)) {
      dead.insert(slot);
      slot_of_.emplace(roster.joiners[slot].name, slot);  // a PUT of it is its return
    }
  return {present.revision, dead};
}

// Every member's key was written with its record, in its join's
// transaction, so a key missing once all have joined is a member already
// gone. One read by the assigner, not one per member, or a round of N costs
// N^2.
std::string EtcdLiveness::snapshot(const std::string& alive_prefix, const std::string& counter, int members) {
  const EtcdRoster& roster = store_.roster(counter, members);
  auto [revision, dead] = read_dead(roster, key_prefix_ + alive_prefix, members, read_timeout_);
  std::string out = std::to_string(revision) + "/" + std::to_string(roster.last_member_created(members));
  for (int slot : dead) out += (out.find(':') == std::string::npos ? ":" : ",") + std::to_string(slot);
  return out;
}

namespace {

struct Snapshot {
  int64_t revision = 0, last_member = 0;
  std::set<int> dead;
};

bool read_number(std::string_view text, int64_t& out) {
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && end == text.data() + text.size();
}

// A snapshot's revisions and dead slots; nullopt if `text` is not one.
std::optional<Snapshot> parse_snapshot(const std::string& text) {
  const auto colon = std::min(text.find(':'), text.size());
  const auto slash = text.find('/');
  Snapshot out;
  if (slash >= colon || !read_number(std::string_view(text).substr(0, slash), out.revision) ||
      !read_number(std::string_view(text).substr(slash + 1, colon - slash - 1), out.last_member) || out.revision <= 0)
    return std::nullopt;
  for (size_t at = colon; at < text.size();) {
    const size_t from = at + 1, comma = std::min(text.find(',', from), text.size());
    int64_t slot = -1;
    if (!read_number(std::string_view(text).substr(from, comma - from), slot) || slot < 0) return std::nullopt;
    out.dead.insert(static_cast<int>(slot));
    at = comma;
  }
  return out;
}

}  // namespace

void EtcdLiveness::joined(const std::string& alive_prefix, const std::string& counter, int members,
                          const std::string& snapshot) {
  stop_watching();
  watched_ = key_prefix_ + alive_prefix;
  counter_ = counter;
  members_ = members;
  auto taken = parse_snapshot(snapshot);
  if (!taken) {
    const EtcdRoster& roster = store_.roster(counter, members);
    auto [revision, dead] = read_dead(roster, watched_, members, read_timeout_);
    taken = Snapshot{revision, roster.last_member_created(members), std::move(dead)};
  }
  dead_ = taken->dead;
  last_member_ = taken->last_member;
  // From the revision after the snapshot: a member gone since is an event.
  resume_from_ = taken->revision + 1;
  rewatch(read_timeout_);
}

void EtcdLiveness::open_watch(int64_t from, milliseconds timeout) {
  if (auto reused = std::move(stopped_)) {
    reused->restart(watched_, etcd::Watch::Scope::prefix_and_prev, from, timeout);
    watch_ = std::move(reused);
  } else {
    watch_ = std::make_unique<etcd::Watch>(etcd_options(etcd_, timeout), watched_, etcd::Watch::Scope::prefix_and_prev,
                                           from);
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
    unread_.clear();  // older than what is read now
    dead_ = read_dead(store_.roster(counter_, members_), watched_, members_, timeout).second;
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
      while (auto events = watch_->next(milliseconds(2)))
        for (auto& e : *events) unread_.push_back(std::move(e));
    } catch (const etcd::EtcdCompacted& e) {
      resync(call_timeout_);
    } catch (const etcd::EtcdError& e) {
      resume_from_ = watch_->revision() + 1;
      watch_.reset();
      spdlog::warn("the watch on the members' leases broke (resuming from revision {}): {}", resume_from_, e.what());
    }
  }
  // In order: a member that went and came back (a lease granted again) is
  // alive. One whose slot cannot be read now waits, with those after it.
  size_t done = 0;
  while (done < unread_.size() && note(unread_[done])) ++done;
  unread_.erase(unread_.begin(), unread_.begin() + static_cast<std::ptrdiff_t>(done));
  return {dead_.begin(), dead_.end()};
}

bool EtcdLiveness::note(const etcd::WatchEvent& e) {
  const std::string name = name_of(e.kv.key, watched_);
  if (name.empty()) return true;
  const auto known = slot_of_.find(name);
  if (e.type == etcd::WatchEvent::Type::put) {
    if (known != slot_of_.end()) dead_.erase(known->second);
    return true;
  }
  if (known != slot_of_.end()) {
    dead_.insert(known->second);
    return true;
  }
  // A key made after the last member joined is a spare's (it drops its own)
  // or a member's made again; the round's counter as of a member's join
  // counts its slot.
  const int64_t created = e.prev ? e.prev->create_revision : 0;
  if (created > last_member_) return true;
  int slot = -1;
  try {
    if (created > 0) {
      try {
        const auto then = client_.range_at(store_.etcd_key(counter_), created, call_timeout_);
        if (then.kv) slot = static_cast<int>(then.kv->version) - 1;
      } catch (const etcd::EtcdRequestError&) {
        // Compacted: the roster says it.
      }
    }
    if (slot < 0) slot = store_.roster(counter_, members_).slot_of(name);
  } catch (const std::exception& ex) {  // etcd's errors, or the store's from the roster
    spdlog::warn("cannot tell which member's lease on etcd ended (trying again): {}", ex.what());
    return false;
  }
  if (slot < 0 || slot >= members_) return true;
  slot_of_.emplace(name, slot);
  dead_.insert(slot);
  return true;
}

int EtcdLiveness::count_alive(const std::string& alive_prefix, int members) {
  const std::string prefix = key_prefix_ + alive_prefix;
  const auto counted = in_store_terms("cannot read the members' leases", [&] {
    return client_.count(prefix, etcd::prefix_range_end(prefix), call_timeout_);
  });
  return static_cast<int>(std::min<int64_t>(counted.count, members));
}

void EtcdLiveness::stop_watching(bool for_good) {
  if (for_good) stopped_.reset();
  else if (watch_) (stopped_ = std::move(watch_))->stop();
  watch_.reset();
  watched_.clear();
  dead_.clear();
  slot_of_.clear();
  unread_.clear();
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
