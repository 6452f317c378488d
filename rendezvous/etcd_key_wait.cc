#include "rendezvous/etcd_key_wait.h"

#include "etcd/client.h"
#include "etcd/options.h"
#include "etcd/watch.h"
#include "rendezvous/etcd_calls.h"
#include "rendezvous/etcd_errors.h"
#include "store/client.h"

namespace cxxrun::rendezvous {

EtcdKeyWait::EtcdKeyWait(const EtcdSettings& settings, etcd::Client& client, std::string prefix)
    : settings_(settings), client_(client), prefix_(std::move(prefix)) {}

EtcdKeyWait::~EtcdKeyWait() = default;

std::string EtcdKeyWait::value(const char* what, const std::string& key, Clock::time_point deadline,
                               std::chrono::milliseconds patience) {
  // A key that is there costs one read; only an absent one is watched for.
  if (auto value = read_or_watch(what, key, deadline, patience)) return *value;
  return await_put(key, deadline, patience);
}

std::optional<std::string> EtcdKeyWait::read_or_watch(const char* what, const std::string& key,
                                                      Clock::time_point deadline, std::chrono::milliseconds patience) {
  // A watch kept from the last wait on this key has seen every write since
  // it found the key absent: no read needed.
  if (watch_ && watched_ == key) return std::nullopt;
  watch_.reset();
  const std::string k = prefix_ + key;
  auto got = as_store_errors(settings_, what, key, [&] { return client_.range(k); });
  if (got.kv) return got.kv->value;
  // From the revision after the read: a write in between is delivered.
  watch_ = as_store_errors(settings_, what, key, [&] {
    return std::make_unique<etcd::Watch>(etcd_options(settings_, remaining(deadline)), k, etcd::Watch::Scope::key,
                                         got.revision + 1);
  });
  watch_->set_timeout(patience);
  watched_ = key;
  return std::nullopt;
}

std::string EtcdKeyWait::await_put(const std::string& key, Clock::time_point deadline,
                                   std::chrono::milliseconds patience) {
  for (;;) {
    std::optional<std::vector<etcd::WatchEvent>> events;
    try {
      events = watch_->next(deadline);
    } catch (const etcd::EtcdCompacted&) {
      // The watch resumed from a revision etcd no longer keeps: the key is
      // read again, and watched from after that read.
      watch_.reset();
      watched_.clear();
      if (auto value = read_or_watch("wait", key, deadline, patience)) return *value;
      continue;
    } catch (const etcd::EtcdError&) {
      watch_.reset();
      rethrow_as_store_error(etcd_context(settings_, "wait", key));
    }
    if (!events) throw store::StoreTimeout("etcd wait " + key + ": the key was not written in time");
    for (const auto& e : *events)
      if (e.type == etcd::WatchEvent::Type::put) {
        watch_.reset();  // the key exists now; the next wait reads it
        watched_.clear();
        return e.kv.value;
      }
  }
}

}  // namespace cxxrun::rendezvous
