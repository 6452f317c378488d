#include "rendezvous/etcd_milestones.h"

#include <utility>

#include "etcd/client.h"
#include "etcd/watch.h"
#include "rendezvous/etcd_errors.h"

namespace cxxrun::rendezvous {

EtcdMilestones::EtcdMilestones(const EtcdSettings& settings, etcd::Client& client, etcd::Options watch)
    : settings_(settings), client_(client), watch_options_(std::move(watch)) {}

EtcdMilestones::~EtcdMilestones() = default;

void EtcdMilestones::expect_under(const std::string& prefix) {
  if (prefix == prefix_) return;
  forget();
  prefix_ = prefix;
}

bool EtcdMilestones::covers(const std::string& key) const {
  return !prefix_.empty() && key.compare(0, prefix_.size(), prefix_) == 0;
}

void EtcdMilestones::follow(const std::string& group, int64_t from) {
  // A watch from revision W delivers every write from W on.
  if (watch_ && from >= from_ && covers(group)) read_groups_.insert(group);
}

void EtcdMilestones::forget() {
  watch_.reset();
  seen_.clear();
  read_groups_.clear();
}

bool EtcdMilestones::take(Clock::time_point deadline) {
  if (!watch_) return false;
  std::optional<std::vector<etcd::WatchEvent>> events;
  try {
    events = watch_->next(deadline);
  } catch (const etcd::EtcdCompacted&) {
    // What it missed is gone from etcd's history: read each key again.
    forget();
    return false;
  } catch (const etcd::EtcdError&) {
    forget();
    rethrow_as_store_error(etcd_context(settings_, "watch", prefix_));
  }
  if (!events) return false;
  for (auto& e : *events) {
    if (e.type == etcd::WatchEvent::Type::del) seen_.erase(e.kv.key);
    else remember(e.kv);
  }
  return true;
}

void EtcdMilestones::remember(etcd::KeyValue& kv) {
  Seen& seen = seen_[kv.key];
  // A read may have brought a later value than a put still on its way.
  if (kv.mod_revision >= seen.revision) seen = {std::move(kv.value), kv.mod_revision};
}

std::optional<std::string> EtcdMilestones::value(const std::string& what, const std::string& named,
                                                 const std::string& key, Clock::time_point deadline, bool wait,
                                                 std::chrono::milliseconds watch_timeout) {
  // Bounded: the watch starts again only after etcd compacted what it
  // missed, once per pass.
  for (int pass = 0; pass < 3; ++pass) {
    while (take(Clock::time_point{})) {
    }
    if (auto it = seen_.find(key); it != seen_.end()) return it->second.value;
    // A milestone not yet read is read with the rest of its group (the
    // round's: "r<k>/"), a few keys in one answer: the round's completion,
    // `assigned`, the master and the event then cost one read, not four.
    // A key right under the prefix is of the prefix's own group (a
    // connection told the round events' prefix: every round's event).
    const size_t slash = key.find('/', prefix_.size());
    const std::string group = slash == std::string::npos ? prefix_ : key.substr(0, slash + 1);
    // A group read while the watch ran needs no second read: what it lacked
    // comes on the watch.
    if (!watch_ || !read_groups_.count(group)) {
      auto got = as_store_errors(settings_, what, named, [&] { return client_.range_prefix(group); });
      if (!watch_) {
        // From the revision after the read: a write in between is delivered.
        from_ = got.revision + 1;
        // Made with the store's timeout, not what is left of this call's:
        // it is kept for the store's life, and a get_if_set (a deadline of
        // now) gave it a millisecond to be created.
        watch_ = as_store_errors(settings_, what, named, [&] {
          etcd::Options options = watch_options_;
          options.timeout = watch_timeout;
          return std::make_unique<etcd::Watch>(options, prefix_, etcd::Watch::Scope::prefix, from_);
        });
        // A stream broken by an election is made again for as long as the
        // store waits, not for what was left of the first wait.
        watch_->set_timeout(watch_timeout);
      }
      // Kept: the watch, from before this read, brings every later write.
      for (auto& kv : got.kvs) remember(kv);
      read_groups_.insert(group);
      if (auto it = seen_.find(key); it != seen_.end()) return it->second.value;
    }
    if (!wait) return std::nullopt;
    while (watch_) {
      if (!take(deadline)) {
        if (!watch_) break;  // compacted: read again
        return std::nullopt;  // the deadline passed
      }
      if (auto it = seen_.find(key); it != seen_.end()) return it->second.value;
    }
  }
  throw store::StoreError("etcd wait " + named + ": the watch kept losing its history to compaction");
}

}  // namespace cxxrun::rendezvous
