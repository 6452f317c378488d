#include "agent/progress/attempt_record.h"

#include <fmt/format.h>

namespace cxxrun::agent {
namespace {

double seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

}  // namespace

std::string_view step_source_name(StepSource s) {
  switch (s) {
    case StepSource::output: return "output";
    case StepSource::program: return "program";
    case StepSource::checkpoint: break;
  }
  return "checkpoint";
}

void AttemptRecord::progress(StepSource source, std::optional<uint64_t> step, Clock::time_point at) {
  if (!first_progress || at < *first_progress) first_progress = at;
  if (!step) return;
  const Step s{*step, at, source};
  if (!first_step || at < first_step->at) first_step = s;
  if (!highest || *step > highest->step) highest = s;
}

void AttemptRecord::checkpoint(std::string name, std::optional<uint64_t> step, Clock::time_point at) {
  progress(StepSource::checkpoint, step, at);
  ++checkpoints;
  // Several may come in one read: the last written is the last one.
  if (!last_checkpoint || at >= last_checkpoint->at) last_checkpoint = Checkpoint{std::move(name), step, at};
}

std::optional<std::chrono::nanoseconds> AttemptRecord::startup() const {
  if (!first_progress) return std::nullopt;
  // Progress read from before the spawn (a clock's grain) is at the start.
  return std::max(std::chrono::nanoseconds(0), *first_progress - started);
}

std::optional<double> AttemptRecord::steps_per_second() const {
  if (!first_step || !highest || highest->step <= first_step->step || highest->at <= first_step->at)
    return std::nullopt;
  return static_cast<double>(highest->step - first_step->step) / seconds(highest->at - first_step->at);
}

std::chrono::nanoseconds AttemptRecord::duration(Clock::time_point now) const {
  return std::max(std::chrono::nanoseconds(0), ended.value_or(now) - started);
}

std::string describe(const AttemptRecord& r) {
  const auto end = r.ended.value_or(AttemptRecord::Clock::now());
  if (!r.first_progress) return fmt::format("attempt {}: no progress in {:.1f} s", r.attempt, seconds(r.duration(end)));
  std::string line = fmt::format("attempt {}: first progress {:.1f} s after start", r.attempt, seconds(*r.startup()));
  if (r.highest) {
    line += fmt::format("; reached step {}", r.highest->step);
    if (auto rate = r.steps_per_second())
      line += *rate >= 10 ? fmt::format(" ({:.0f} steps/s)", *rate)
              : *rate >= 1 ? fmt::format(" ({:.1f} steps/s)", *rate)
                           : fmt::format(" ({:.2g} steps/s)", *rate);
  }
  if (r.last_checkpoint) {
    const auto& c = *r.last_checkpoint;
    line += c.step ? fmt::format("; last checkpoint step {}", *c.step) : fmt::format("; last checkpoint {}", c.name);
    line += fmt::format(", {:.1f} s before the end", seconds(std::max(std::chrono::nanoseconds(0), end - c.at)));
  }
  return line;
}

}  // namespace cxxrun::agent
