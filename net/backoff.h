// Exponential backoff with jitter, bounded by a deadline. Many agents start at
// once and all find the store not up yet; jitter keeps their retries from
// arriving in lockstep.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

namespace cxxrun::net {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;
  using Duration = std::chrono::milliseconds;

  explicit Backoff(Duration initial = Duration(10), Duration cap = Duration(1000))
      : delay_(initial),
        cap_(cap),
        rng_(std::random_device{}() ^ static_cast<unsigned>(getpid())) {}

  // Sleeps the next delay, cut short at `deadline`. False when the deadline
  // has passed (nothing left to retry in).
  bool sleep_until_next(Clock::time_point deadline) {
    auto now = Clock::now();
    if (now >= deadline) return false;
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    auto wait = std::chrono::duration_cast<Clock::duration>(delay_ * jitter(rng_));
    std::this_thread::sleep_for(std::min<Clock::duration>(wait, deadline - now));
    delay_ = std::min(delay_ * 2, cap_);
    return Clock::now() < deadline;
  }

 private:
  Duration delay_;
  Duration cap_;
  std::minstd_rand rng_;
};

}  // namespace cxxrun::net
