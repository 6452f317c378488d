// Waits, on a thread and a store connection of its own, for the current
// rendezvous round's event key, and hands the event to the agent's event
// loop. The store pushes: a WAIT returns the moment another node writes the
// key, so every agent learns of a failure anywhere within a round trip.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace cxxrun::store {
class StoreClient;
}

namespace cxxrun::agent {

class EventWatcher {
 public:
  // `deliver(key, event)` runs on the watcher's thread: it must only post
  // the event to the agent's loop, which ignores keys it no longer watches.
  using Deliver = std::function<void(const std::string& key, const std::string& event)>;
  EventWatcher(std::unique_ptr<store::StoreClient> client, Deliver deliver);
  ~EventWatcher();  // stops within one wait slice
  EventWatcher(const EventWatcher&) = delete;
  EventWatcher& operator=(const EventWatcher&) = delete;

  // Watch this key from now on; each key's event is delivered once.
  void watch(const std::string& key);

 private:
  void loop();

  std::unique_ptr<store::StoreClient> client_;
  Deliver deliver_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::string key_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cxxrun::agent
