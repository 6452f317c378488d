#include "agent/rendezvous_link.h"

#include <boost/asio/post.hpp>

namespace cxxrun::agent {

RendezvousLink::RendezvousLink(boost::asio::io_context& io, rendezvous::Rendezvous& rdzv)
    : io_(io), rdzv_(rdzv), thread_([this] { loop(); }) {}

RendezvousLink::~RendezvousLink() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
    calls_.clear();
  }
  cv_.notify_all();
  thread_.join();
}

void RendezvousLink::call(Call call) {
  {
    std::lock_guard l(mu_);
    calls_.push_back(std::move(call));
  }
  cv_.notify_all();
}

bool RendezvousLink::settle(std::chrono::milliseconds limit) {
  std::unique_lock l(mu_);
  calls_.clear();
  return cv_.wait_for(l, limit, [&] { return !busy_; });
}

void RendezvousLink::loop() {
  for (;;) {
    Call next;
    {
      std::unique_lock l(mu_);
      busy_ = false;
      cv_.notify_all();
      cv_.wait(l, [&] { return stop_ || !calls_.empty(); });
      if (stop_) return;
      next = std::move(calls_.front());
      calls_.pop_front();
      busy_ = true;
    }
    if (Then then = next(rdzv_)) boost::asio::post(io_, std::move(then));
  }
}

}  // namespace cxxrun::agent
