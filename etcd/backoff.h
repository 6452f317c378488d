// Pauses between failed attempts, doubling from `first` to `cap`, jittered
// so that many agents retrying after the same leader loss (or the same
// overload) do not arrive in lockstep. The default: between rounds of
// attempts (every member failed once), 10 ms doubling to 500 ms. Internal to
// etcd/.
#pragma once

#include <algorithm>
#include <chrono>
#include <random>

namespace cxxrun::etcd {

class Backoff {
 public:
  using Clock = std::chrono::steady_clock;

  Backoff() = default;
  Backoff(std::chrono::milliseconds first, std::chrono::milliseconds cap) : cap_(cap), delay_(first) {}

  // The next pause, ending no later than `deadline`.
  Clock::time_point next_wake(Clock::time_point deadline) {
    std::uniform_real_distribution<double> jitter(0.5, 1.5);
    auto pause = std::chrono::duration_cast<Clock::duration>(delay_ * jitter(rng_));
    delay_ = std::min(delay_ * 2, cap_);
    return std::min(deadline, Clock::now() + pause);
  }

 private:
  std::chrono::milliseconds cap_{500};
  std::chrono::milliseconds delay_{10};
  std::minstd_rand rng_{std::random_device{}()};
};

}  // namespace cxxrun::etcd
