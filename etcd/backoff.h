// Pauses between rounds of failed attempts (every member failed once):
// 10 ms doubling to 500 ms, jittered so that many agents retrying after the
// same leader loss do not arrive in lockstep. Internal to etcd/.
#pragma once

#include <algorithm>
#include <chrono>
#include <random>

namespace cxxrun::etcd {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  // The next pause, ending no later than `deadline`.
  Clock::time_point next_wake(Clock::time_point deadline) {
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    auto pause = std::chrono::duration_cast<Clock::duration>(delay_ * jitter(rng_));
    delay_ = std::min(delay_ * 2, kCap);
    return std::min(deadline, Clock::now() + pause);
  }

 private:
  static constexpr std::chrono::milliseconds kCap{500};
  std::chrono::milliseconds delay_{10};
  std::minstd_rand rng_{std::random_device{}()};
};

}  // namespace cxxrun::etcd
