#include "agent/straggler/step_clock.h"

namespace cxxrun::agent {

void StepClock::step(int local_rank, std::optional<uint64_t> step, Clock::time_point now) {
  auto [it, first] = ranks_.try_emplace(local_rank);
  Rank& r = it->second;
  if (first) {
    r.step = step;
    r.anchor = r.last = now;
    return;
  }
  uint64_t n = 1;
  if (step) {
    // The same step seen again (its page polled, or both sources): nothing new.
    if (r.step && *step <= *r.step) return;
    n = r.step ? *step - *r.step : 1;
    r.step = step;
  }
  r.steps += n;
  r.last = now;
  r.timed = true;
}

std::map<int, double> StepClock::window(Clock::time_point now, Clock::duration window) {
  std::map<int, double> out;
  for (auto& [local_rank, r] : ranks_) {
    if (r.steps > 0) {
      out[local_rank] = std::chrono::duration<double>(r.last - r.anchor).count() / static_cast<double>(r.steps);
      r.anchor = r.last;
      r.steps = 0;
    } else if (r.timed && now - r.last >= window) {
      out[local_rank] = std::chrono::duration<double>(now - r.last).count();
    }
  }
  return out;
}

}  // namespace cxxrun::agent
