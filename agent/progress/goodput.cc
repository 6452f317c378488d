#include "agent/progress/goodput.h"

#include <algorithm>

#include <fmt/format.h>

namespace cxxrun::agent {
namespace {

using Clock = std::chrono::steady_clock;

double as_seconds(std::chrono::nanoseconds d) { return std::chrono::duration<double>(d).count(); }

// Short jobs in seconds, long ones in the unit a person reads them in.
std::string amount(std::chrono::nanoseconds d) {
  const double s = as_seconds(d);
  if (s < 600) return fmt::format("{:.1f} s", s);
  if (s < 36000) return fmt::format("{:.1f} min", s / 60);
  return fmt::format("{:.1f} h", s / 3600);
}

// The words of the line, which reads as prose; the event log uses the names.
std::string_view spoken(GoodputPhase p) {
  switch (p) {
    case GoodputPhase::lost: return "lost to failures";
    case GoodputPhase::hang_detection: return "hang detection";
    default: return goodput_phase_name(p);
  }
}

Clock::time_point within(Clock::time_point t, Clock::time_point lo, Clock::time_point hi) {
  return std::min(std::max(t, lo), hi);
}

}  // namespace

std::string_view goodput_phase_name(GoodputPhase p) {
  switch (p) {
    case GoodputPhase::rendezvous: return "rendezvous";
    case GoodputPhase::startup: return "startup";
    case GoodputPhase::productive: return "productive";
    case GoodputPhase::lost: return "lost";
    case GoodputPhase::hang_detection: return "hang_detection";
    case GoodputPhase::teardown: return "teardown";
    case GoodputPhase::waiting: break;
  }
  return "waiting";
}

double GoodputTotals::ratio() const {
  if (wall.count() <= 0) return 0;
  return std::chrono::duration<double>((*this)[GoodputPhase::productive]) / std::chrono::duration<double>(wall);
}

std::string describe(const GoodputTotals& t) {
  std::string line = fmt::format("goodput {:.1f}% of {}: productive {}", t.ratio() * 100, amount(t.wall),
                                 amount(t[GoodputPhase::productive]));
  const char* sep = "; ";
  // Where the rest went, the attempts' own costs first. What rounds to
  // nothing is left out.
  for (GoodputPhase p : {GoodputPhase::startup, GoodputPhase::lost, GoodputPhase::rendezvous,
                         GoodputPhase::hang_detection, GoodputPhase::teardown, GoodputPhase::waiting}) {
    if (amount(t[p]) == amount(std::chrono::nanoseconds(0))) continue;
    line += fmt::format("{}{} {}", sep, spoken(p), amount(t[p]));
    sep = ", ";
  }
  if (t.unknown_progress) line += "; no progress source: startup and lost work not known";
  return line;
}

Goodput::Goodput(Clock::time_point started, std::chrono::system_clock::time_point started_wall, OnSpan on_span)
    : started_(started), started_wall_(started_wall), on_span_(std::move(on_span)), since_(started) {}

void Goodput::rendezvous_began(Clock::time_point at) {
  if (open_ != Open::waiting) return;
  close(GoodputPhase::waiting, at);
  open_ = Open::rendezvous;
}

void Goodput::rendezvous_done(Clock::time_point at) {
  if (open_ != Open::rendezvous) return;
  close(GoodputPhase::rendezvous, at);
  open_ = Open::waiting;
}

void Goodput::attempt_started(int attempt, Clock::time_point at) {
  // A new attempt without the last one's end, or straight from a round:
  // what was open closes as it would have.
  if (open_ == Open::running || open_ == Open::teardown) attempt_ended(nullptr, false, at);
  if (open_ == Open::done) return;
  close(open_ == Open::rendezvous ? GoodputPhase::rendezvous : GoodputPhase::waiting, at);
  attempt_ = attempt;
  open_ = Open::running;
  stop_.reset();
  silent_since_.reset();
}

void Goodput::hang(Clock::time_point silent_since) {
  if (open_ != Open::running) return;
  silent_since_ = silent_since_ ? std::min(*silent_since_, silent_since) : silent_since;
}

void Goodput::stop_requested(Clock::time_point at) {
  if (open_ != Open::running) return;
  stop_ = clamp(at);
  open_ = Open::teardown;
}

void Goodput::attempt_ended(const AttemptRecord* record, bool succeeded, Clock::time_point at) {
  if (open_ != Open::running && open_ != Open::teardown) return;
  at = clamp(at);
  if (!record) closed_.unknown_progress = true;
  split(record, succeeded, at, [this](GoodputPhase p, Clock::time_point from, Clock::time_point to) {
    emit(p, from, to);
  });
  since_ = at;
  open_ = Open::waiting;
  stop_.reset();
  silent_since_.reset();
}

GoodputTotals Goodput::finish(Clock::time_point at) {
  if (open_ == Open::done) return closed_;
  // The agent leaves with a group running (it could not be stopped): its
  // time is what it was; nothing says it was lost.
  if (open_ == Open::running || open_ == Open::teardown) {
    const bool unknown = closed_.unknown_progress;
    attempt_ended(nullptr, true, at);
    closed_.unknown_progress = unknown;
  }
  close(open_ == Open::rendezvous ? GoodputPhase::rendezvous : GoodputPhase::waiting, at);
  open_ = Open::done;
  closed_.wall = since_ - started_;
  return closed_;
}

GoodputTotals Goodput::totals(Clock::time_point now, const AttemptRecord* running) const {
  GoodputTotals t = closed_;
  now = clamp(now);
  t.wall = (open_ == Open::done ? since_ : now) - started_;
  const auto add = [&t](GoodputPhase p, Clock::time_point from, Clock::time_point to) {
    t.by_phase[static_cast<size_t>(p)] += to - from;
  };
  switch (open_) {
    case Open::waiting: add(GoodputPhase::waiting, since_, now); break;
    case Open::rendezvous: add(GoodputPhase::rendezvous, since_, now); break;
    case Open::running:
    case Open::teardown:
      if (!running) t.unknown_progress = true;
      split(running, true, now, add);
      break;
    case Open::done: break;
  }
  return t;
}

void Goodput::split(const AttemptRecord* r, bool succeeded, Clock::time_point at,
                    const std::function<void(GoodputPhase, Clock::time_point, Clock::time_point)>& out) const {
  const Clock::time_point spawn = since_;
  const Clock::time_point stop = within(stop_.value_or(at), spawn, at);
  const Clock::time_point silent = silent_since_ ? within(*silent_since_, spawn, stop) : stop;
  if (!r) {
    out(GoodputPhase::productive, spawn, silent);
  } else {
    // Progress read from before the spawn (a clock's grain) is at the spawn.
    const Clock::time_point first = r->first_progress ? within(*r->first_progress, spawn, silent) : silent;
    out(GoodputPhase::startup, spawn, first);
    // What was not saved is lost: from the last checkpoint of this attempt,
    // or from its first progress without one.
    Clock::time_point saved = silent;
    if (!succeeded) saved = r->last_checkpoint ? within(r->last_checkpoint->at, first, silent) : first;
    out(GoodputPhase::productive, first, saved);
    out(GoodputPhase::lost, saved, silent);
  }
  out(GoodputPhase::hang_detection, silent, stop);
  out(GoodputPhase::teardown, stop, at);
}

void Goodput::close(GoodputPhase phase, Clock::time_point end) {
  end = clamp(end);
  emit(phase, since_, end);
  since_ = end;
}

void Goodput::emit(GoodputPhase phase, Clock::time_point start, Clock::time_point end) {
  if (end <= start) return;
  closed_.by_phase[static_cast<size_t>(phase)] += end - start;
  if (!on_span_) return;
  const auto epoch_ms = [this](Clock::time_point t) {
    return static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                      (started_wall_ + std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                                           t - started_))
                                          .time_since_epoch())
                                      .count());
  };
  on_span_(PhaseSpan{phase, attempt_, start, end, epoch_ms(start), epoch_ms(end)});
}

}  // namespace cxxrun::agent
