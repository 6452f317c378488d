// An EtcdStore's wait for one key that is not a milestone (a GET that
// waits, a WAIT): a read, and where the key is absent a watch on it from the
// revision after the read, so that a write in between is never missed. The
// watch is kept while waits are on the same key: a wait cut into slices (the
// round watcher's, a keep-alive interval each) costs no request after the
// first, and a stream broken by an election is made again for as long as
// the store waits, not for what was left of the first slice.
//
// Keys here are the store's (EtcdStore::etcd_key adds the prefix). Errors
// are the store's (rendezvous/etcd_errors.h). Used from the store's one
// thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "rendezvous/rendezvous.h"

namespace cxxrun::etcd {
class Client;
class Watch;
}  // namespace cxxrun::etcd

namespace cxxrun::rendezvous {

class EtcdKeyWait {
 public:
  using Clock = std::chrono::steady_clock;

  // `client` is the store's, borrowed; it outlives this. `prefix` turns the
  // store's keys into etcd's.
  EtcdKeyWait(const EtcdSettings& settings, etcd::Client& client, std::string prefix);
  ~EtcdKeyWait();

  // The key's value once it is written; StoreTimeout at `deadline`. A watch
  // this makes is made again after a member fails for `patience` (the
  // store's timeout). `what` names the operation in messages ("get").
  std::string value(const char* what, const std::string& key, Clock::time_point deadline,
                    std::chrono::milliseconds patience);

 private:
  // The key's value if it exists; else a watch on it from the revision
  // after the read (kept in watch_), and nullopt.
  std::optional<std::string> read_or_watch(const char* what, const std::string& key, Clock::time_point deadline,
                                           std::chrono::milliseconds patience);
  // Until watch_ delivers a put of `key`, whose value it returns.
  std::string await_put(const std::string& key, Clock::time_point deadline, std::chrono::milliseconds patience);

  const EtcdSettings& settings_;
  etcd::Client& client_;
  const std::string prefix_;
  std::unique_ptr<etcd::Watch> watch_;
  std::string watched_;
};

}  // namespace cxxrun::rendezvous
