#include "rendezvous/request_watcher.h"

#include <spdlog/spdlog.h>

#include "rendezvous/ctl_requests.h"
#include "store/client.h"

namespace cxxrun::rendezvous {
namespace {

// Bounds how long stopping the watcher takes; a write to the key still wakes
// the WAIT at once.
constexpr std::chrono::milliseconds kWaitSlice{500};

}  // namespace

RequestWatcher::RequestWatcher(std::unique_ptr<store::StoreClient> client, std::string run_id, OnRequest deliver)
    : client_(std::move(client)), run_id_(std::move(run_id)), deliver_(std::move(deliver)),
      thread_() {
  // Every call the watcher makes ends within a slice, reconnects included:
  // with the client's own deadline (the store's read_timeout), a store that
  // died and came back held the agent's exit for minutes in the join below.
  client_->set_timeout(kWaitSlice);
  thread_ = std::thread([this] { loop(); });
}

RequestWatcher::~RequestWatcher() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void RequestWatcher::loop() {
  using Clock = std::chrono::steady_clock;
  long long next = -1;  // unknown until the store answers
  auto waiting_since = Clock::now();
  bool failing = false;
  for (;;) {
    {
      std::lock_guard l(mu_);
      if (stop_) return;
    }
    try {
      if (next < 0) {
        next = client_->add(requests::sequence_key(run_id_), 0) + 1;
        waiting_since = Clock::now();
      }
      const std::string key = requests::request_key(run_id_, next);
      try {
        client_->wait({key}, kWaitSlice);
      } catch (const store::StoreTimeout&) {
        if (Clock::now() - waiting_since >= kSkipAfter && client_->add(requests::sequence_key(run_id_), 0) > next) {
          ++next;
          waiting_since = Clock::now();
        }
        continue;
      }
      // The caller deletes it once it has its answers; gone by now is fine.
      const std::optional<std::string> request = client_->get_if_set(key);
      const long long n = next++;
      waiting_since = Clock::now();
      failing = false;
      if (request) deliver_(n, *request);
    } catch (const std::exception& e) {
      // The store may be restarting or gone; keep-alives report that. Back
      // off a slice so a dead store does not spin this thread.
      if (!failing) spdlog::debug("cannot watch the rendezvous store for cxxrunctl's requests: {}", e.what());
      failing = true;
      std::unique_lock l(mu_);
      cv_.wait_for(l, kWaitSlice, [&] { return stop_; });
    }
  }
}

}  // namespace cxxrun::rendezvous
