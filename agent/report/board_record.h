// This node's record on the job board (rendezvous/job_board.h), what
// `cxxrunctl status` and `top` show: one line of JSON, built from the same
// snapshot /healthz shows (the straggler verdicts included), plus where the
// supervisor stands. Its fields are
// documented in docs/cxxrunctl.md ("The board record"); cxxrunctl reads them
// by name, so a field is added, never renamed.
//
// Bounded: the record never exceeds `limit` bytes. Long words are cut
// first (a cause's detail, a hang's words: kMaxBoardText each), then ranks
// are left out from the end, counted in "ranks_left_out".
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "agent/report/health_snapshot.h"

namespace cxxrun::agent {

inline constexpr size_t kMaxBoardText = 160;

// What the snapshot does not say: who and where this agent is, and the
// supervisor's state.
struct BoardFacts {
  std::string node;   // this agent's id on the board
  std::string host;   // agent/hostname.h
  pid_t agent_pid = 0;
  int round = 0;
  std::string phase;  // the supervisor's: running, stopping, rendezvous, ...
  int attempt = 0;
  // The highest training step this attempt, and how long ago it was first
  // seen (agent/progress/): nullopt when no step was seen.
  std::optional<uint64_t> step;
  std::optional<double> seconds_since_progress;
  long long updated_ms = 0;  // wall clock, ms since the epoch
};

std::string board_record(const BoardFacts& facts, const HealthSnapshot& snapshot, size_t limit);

}  // namespace cxxrun::agent
