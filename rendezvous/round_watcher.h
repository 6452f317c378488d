// Waits, on a thread and a store connection of its own, for the current
// round's event key, and hands the event on. The store pushes: a WAIT returns
// the moment another node writes the key, so every agent learns of a failure
// anywhere within a round trip, never by polling.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "rendezvous/rendezvous.h"

namespace cxxrun::store {
class StoreClient;
}

namespace cxxrun::rendezvous {

class RoundWatcher {
 public:
  RoundWatcher(std::unique_ptr<store::StoreClient> client, Rendezvous::OnEvent deliver);
  ~RoundWatcher();  // stops within one wait slice
  RoundWatcher(const RoundWatcher&) = delete;
  RoundWatcher& operator=(const RoundWatcher&) = delete;

  // Watch round `round`'s event key from now on; each round's event is
  // delivered once.
  void watch(int round, const std::string& key);

 private:
  void loop();

  std::unique_ptr<store::StoreClient> client_;
  Rendezvous::OnEvent deliver_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string key_;
  int round_ = -1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cxxrun::rendezvous
