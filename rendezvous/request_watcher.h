// Waits, on a thread and a store connection of its own, for cxxrunctl's
// requests to this job (ctl_requests.h) and hands each on, in order, once.
// The store pushes: a WAIT on the next request's key returns the moment a
// caller writes it. It starts after the last request made before it, so an
// agent never answers what was asked before it came. A number whose request
// never came (its caller died between the ADD and the write) is skipped once
// a later number is taken and kSkipAfter has passed.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace cxxrun::store {
class StoreClient;
}

namespace cxxrun::rendezvous {

class RequestWatcher {
 public:
  static constexpr std::chrono::seconds kSkipAfter{10};
  // Called on the watcher's thread: it must only hand the request on.
  using OnRequest = std::function<void(long long n, const std::string& request)>;
  RequestWatcher(std::unique_ptr<store::StoreClient> client, std::string run_id, OnRequest deliver);
  ~RequestWatcher();  // stops within one wait slice, even with the store gone
  RequestWatcher(const RequestWatcher&) = delete;
  RequestWatcher& operator=(const RequestWatcher&) = delete;

 private:
  void loop();

  std::unique_ptr<store::StoreClient> client_;
  const std::string run_id_;
  OnRequest deliver_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace cxxrun::rendezvous
