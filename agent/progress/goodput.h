// Goodput (docs/restarts.md): where this node's wall time went, from the
// agent's start to its exit, phase by phase. The one home of what each
// moment counts as. Passive, with the times given, so tests drive it with
// made-up clocks: the supervisor tells it each boundary, and it hands every
// closed span to `on_span` (the event log's cxxrun.agent.PHASE) as soon as
// the span's phase is known.
//
// The phases tile the wall time, so they sum to it:
//   rendezvous      joining a round: the first join and every re-join
//   startup         an attempt's spawn to its first progress
//                   (agent/progress/attempt_record.h); all of it when none came
//   productive      from the first progress on; for an attempt that did not
//                   succeed, only up to its last checkpoint
//   lost            an attempt that did not succeed (a failure, a hang, a
//                   peer's failure, a membership change, a signal): its work
//                   since its last checkpoint, or since its first progress
//                   when no checkpoint appeared in it
//   hang_detection  a hung worker's silence, from when it fell silent (the
//                   verdict's silence, agent/hang/watchdog.h) to the stop
//   teardown        the stop requested to the group stopped
//   waiting         everything else: setup before the first join, the
//                   barrier, health checks between rounds, the failure
//                   summary's wait
// An attempt runs from its spawn to the stop request; that span is split
// when the attempt ends, from its AttemptRecord. Without a progress source
// (no record) its startup and lost work are not known: all of it is
// productive, and the line says so.
#pragma once

#include <array>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "agent/progress/attempt_record.h"

namespace cxxrun::agent {

// When this node's agent started, on both clocks, and when its first join
// began and ended: the supervisor, made after the join, is told
// (agent/supervisor.h). Defaults: all now.
struct AgentStart {
  std::chrono::steady_clock::time_point at = std::chrono::steady_clock::now();
  std::chrono::system_clock::time_point wall = std::chrono::system_clock::now();
  std::chrono::steady_clock::time_point join_began = at, joined = at;
};

enum class GoodputPhase { rendezvous, startup, productive, lost, hang_detection, teardown, waiting };
inline constexpr GoodputPhase kAllGoodputPhases[] = {
    GoodputPhase::rendezvous, GoodputPhase::startup,  GoodputPhase::productive, GoodputPhase::lost,
    GoodputPhase::hang_detection, GoodputPhase::teardown, GoodputPhase::waiting};
// "rendezvous", "startup", "productive", "lost", "hang_detection",
// "teardown", "waiting": the event log's and /metrics' words.
std::string_view goodput_phase_name(GoodputPhase p);

// One closed span of one phase. `attempt` is the attempt running, or the
// last one started (0 before the first); the epoch times are the steady
// ones placed on the system clock as it read at the agent's start.
struct PhaseSpan {
  GoodputPhase phase = GoodputPhase::waiting;
  int attempt = 0;
  std::chrono::steady_clock::time_point start, end;
  long long start_ms = 0, end_ms = 0;  // ms since the epoch
};

// The wall time so far and its share per phase.
struct GoodputTotals {
  std::array<std::chrono::nanoseconds, std::size(kAllGoodputPhases)> by_phase{};
  std::chrono::nanoseconds wall{0};
  // Some attempt ran without a progress source: its startup and lost work
  // were counted as productive.
  bool unknown_progress = false;

  std::chrono::nanoseconds operator[](GoodputPhase p) const { return by_phase[static_cast<size_t>(p)]; }
  // productive / wall; 0 before any wall time.
  double ratio() const;
};

// The summary's line: "goodput 81.2% of 61.3 s: productive 49.8 s; startup
// 4.1 s, lost to failures 3.2 s, rendezvous 0.4 s, hang detection 2.0 s,
// teardown 1.1 s, waiting 0.7 s", phases that round to nothing left out,
// and "; no progress source: startup and lost work not known" when so.
std::string describe(const GoodputTotals& t);

class Goodput {
 public:
  using Clock = std::chrono::steady_clock;
  using OnSpan = std::function<void(const PhaseSpan&)>;

  // `started`: the agent's start, where the wall time begins, and the
  // system clock at that moment. `on_span` may be empty.
  Goodput(Clock::time_point started, std::chrono::system_clock::time_point started_wall, OnSpan on_span);

  // Boundaries, each at `at`. A time before the last boundary counts as it.
  void rendezvous_began(Clock::time_point at);
  void rendezvous_done(Clock::time_point at);
  // The attempt's workers are being spawned.
  void attempt_started(int attempt, Clock::time_point at);
  // A hang verdict on the running attempt: its worker fell silent at
  // `silent_since`. The earliest of several counts.
  void hang(Clock::time_point silent_since);
  // The running attempt is to stop: its running span ends here (the first
  // call of an attempt counts).
  void stop_requested(Clock::time_point at);
  // Its group stopped: the running span is split from `record` (nullptr:
  // no progress source) and emitted, with the teardown.
  void attempt_ended(const AttemptRecord* record, bool succeeded, Clock::time_point at);
  // The agent exits: the open span closes; the job's totals. Later calls
  // change nothing.
  GoodputTotals finish(Clock::time_point at);

  // The totals as of `now`, for /metrics while the job runs: the open span
  // counted provisionally; a running attempt as if it were to succeed, from
  // `running` (its record so far; nullptr: no progress source).
  GoodputTotals totals(Clock::time_point now, const AttemptRecord* running) const;

 private:
  enum class Open { waiting, rendezvous, running, teardown, done };
  // The running span [attempt_start_, stop) and the teardown to `at`,
  // split as the header says; each piece to `emit`.
  void split(const AttemptRecord* record, bool succeeded, Clock::time_point at,
             const std::function<void(GoodputPhase, Clock::time_point, Clock::time_point)>& emit) const;
  void close(GoodputPhase phase, Clock::time_point end);
  void emit(GoodputPhase phase, Clock::time_point start, Clock::time_point end);
  Clock::time_point clamp(Clock::time_point at) const { return at < since_ ? since_ : at; }

  Clock::time_point started_;
  std::chrono::system_clock::time_point started_wall_;
  OnSpan on_span_;
  GoodputTotals closed_;
  Open open_ = Open::waiting;
  Clock::time_point since_;  // where the open span began
  int attempt_ = 0;
  std::optional<Clock::time_point> stop_;
  std::optional<Clock::time_point> silent_since_;
};

}  // namespace cxxrun::agent
