#include "rendezvous/round_watcher.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "store/client.h"

namespace cxxrun::rendezvous {
namespace {

// Bounds how long stopping the watcher takes; a write to the key still wakes
// the WAIT at once.
constexpr std::chrono::milliseconds kRoundWaitSlice{500};

}  // namespace

RoundWatcher::RoundWatcher(std::unique_ptr<store::StoreClient> client, Rendezvous::OnEvent deliver)
    : client_(std::move(client)), deliver_(std::move(deliver)), thread_([this] { loop(); }) {}

RoundWatcher::~RoundWatcher() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void RoundWatcher::watch(int round, const std::string& key) {
  {
    std::lock_guard l(mu_);
    key_ = key;
    round_ = round;
  }
  cv_.notify_all();
}

void RoundWatcher::loop() {
  bool failing = false;
  for (;;) {
    std::string key;
    int round;
    {
      std::unique_lock l(mu_);
      cv_.wait(l, [&] { return stop_ || !key_.empty(); });
      if (stop_) return;
      key = key_;
      round = round_;
    }
    try {
      // One wait-and-read: a WAIT and then a GET (each waiting for the key
      // first) made a TCPStore answer three requests, etcd two reads.
      const std::string event = client_->get(key, kRoundWaitSlice);
      {
        std::lock_guard l(mu_);
        if (key_ == key) key_.clear();  // delivered; wait for the next round's key
      }
      failing = false;
      deliver_(round, parse_round_event(event));
    } catch (const store::StoreTimeout&) {
    } catch (const std::exception& e) {
      // The store may be restarting or gone; keep-alives report that. Back
      // off a slice so a dead store does not spin this thread.
      if (!failing) spdlog::warn("cannot watch the rendezvous store for events: {}", e.what());
      failing = true;
      std::unique_lock l(mu_);
      cv_.wait_for(l, kRoundWaitSlice, [&] { return stop_; });
    }
  }
}

}  // namespace cxxrun::rendezvous
