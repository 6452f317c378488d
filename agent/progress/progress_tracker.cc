#include "agent/progress/progress_tracker.h"

#include <algorithm>

#include "agent/progress/checkpoint_dir.h"
#include "agent/progress/progress_pattern.h"

namespace cxxrun::agent {
namespace {

// The program's step is polled this often: the page keeps only the last
// report and its time, so the first progress it shows is late by up to one
// poll. A page read is a few loads; the directory is read once a second.
constexpr std::chrono::milliseconds kPoll{250};
constexpr int kCheckpointEveryPolls = 4;

}  // namespace

ProgressTracker::ProgressTracker(boost::asio::io_context& io, const Config& c, StepProbe probe)
    : probe_(std::move(probe)), timer_(io) {
  if (!c.progress_pattern.empty()) pattern_ = std::make_unique<ProgressPattern>(c.progress_pattern);
  if (!c.checkpoint_dir.empty()) checkpoints_ = std::make_unique<CheckpointDir>(c.checkpoint_dir);
}

ProgressTracker::~ProgressTracker() = default;

void ProgressTracker::line(std::string_view line) {
  if (!running_ || !pattern_) return;
  if (auto m = pattern_->match(line)) record_.progress(StepSource::output, m->step, Clock::now());
}

void ProgressTracker::attempt_started(int attempt) {
  record_ = AttemptRecord{};
  record_.attempt = attempt;
  record_.started = Clock::now();
  running_ = true;
  spawned_ = false;
  ticks_ = 0;
  if (checkpoints_) checkpoints_->reset();
  tick();
}

void ProgressTracker::worker_started() {
  if (!running_ || spawned_) return;
  spawned_ = true;
  record_.started = Clock::now();
}

std::optional<AttemptRecord> ProgressTracker::attempt_ended() {
  if (!running_) return std::nullopt;
  poll(true);  // what came since the last tick: a checkpoint written just before a crash counts
  running_ = false;
  timer_.cancel();
  record_.ended = Clock::now();
  if (!pattern_ && !checkpoints_ && !step_reported_) return std::nullopt;
  return record_;
}

const AttemptRecord* ProgressTracker::record() const {
  if (record_.started == Clock::time_point{} || (!pattern_ && !checkpoints_ && !step_reported_)) return nullptr;
  return &record_;
}

void ProgressTracker::tick() {
  timer_.expires_after(kPoll);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || !running_) return;
    poll(++ticks_ % kCheckpointEveryPolls == 0);
    tick();
  });
}

void ProgressTracker::poll(bool checkpoints) {
  if (probe_) {
    if (auto s = probe_()) {
      step_reported_ = true;
      record_.progress(StepSource::program, s->first, Clock::now() - s->second);
    }
  }
  if (!checkpoints || !checkpoints_) return;
  const auto now = Clock::now();
  const auto wall_now = std::chrono::system_clock::now();
  for (auto& found : checkpoints_->poll()) {
    // Its time is when it was written, within this attempt and not in the
    // future (another node's clock on a shared filesystem may be off).
    auto at = now;
    if (found.written && *found.written < wall_now)
      at = std::max(record_.started, now - std::chrono::duration_cast<Clock::duration>(wall_now - *found.written));
    record_.checkpoint(std::move(found.name), found.step, at);
  }
}

}  // namespace cxxrun::agent
