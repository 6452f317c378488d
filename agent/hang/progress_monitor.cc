#include "agent/hang/progress_monitor.h"

#include <algorithm>

namespace cxxrun::agent {

using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

ProgressMonitor::ProgressMonitor(milliseconds timeout, microseconds cpu_floor)
    : timeout_(timeout), cpu_floor_(cpu_floor) {}

void ProgressMonitor::reset(Clock::time_point now) {
  seen_.clear();
  started_ = now;
}

void ProgressMonitor::forget(int local_rank) { seen_.erase(local_rank); }

void ProgressMonitor::observe(int local_rank, const Sample& s, Clock::time_point now) {
  auto it = seen_.find(local_rank);
  if (it == seen_.end()) {
    // Its first sample: it counts as progressing since the attempt began.
    seen_[local_rank] = Seen{s, s.cpu, started_ == Clock::time_point{} ? now : started_};
    return;
  }
  Seen& seen = it->second;
  // The floor scales with the time since it last progressed, plus two of
  // the kernel's 10 ms ticks for the counting's grain.
  const auto since = duration_cast<microseconds>(now - seen.progressed);
  const auto floor = microseconds(cpu_floor_.count() * since.count() / 1'000'000) + milliseconds(20);
  const bool cpu = s.cpu - seen.cpu_at_progress > floor;
  if (cpu || s.output_bytes != seen.last.output_bytes || s.beats != seen.last.beats) {
    seen.progressed = now;
    seen.cpu_at_progress = s.cpu;
  }
  seen.last = s;
}

std::optional<ProgressMonitor::Verdict> ProgressMonitor::check(Clock::time_point now) const {
  if (seen_.empty() || timeout_.count() <= 0) return std::nullopt;
  Clock::time_point latest = Clock::time_point::min();
  for (const auto& [rank, seen] : seen_) latest = std::max(latest, seen.progressed);
  const auto idle = duration_cast<milliseconds>(now - latest);
  if (idle < timeout_) return std::nullopt;
  return Verdict{idle};
}

}  // namespace cxxrun::agent
