// What cxxrunctl shows of the job board (rendezvous/job_board.h): the
// agents' records (agent/report/board_record.h, fields in docs/cxxrunctl.md)
// read by name into rows, and the three ways to print them: status's text,
// status --json, and one frame of top. Pure: no I/O, the clock is given.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cxxrun::ctl {

// A node whose record is older than this shows as stale: its agent stopped
// publishing (it died, or cannot reach the store).
inline constexpr double kStaleSeconds = 10.0;

struct RankRow {
  int rank = -1;
  int local_rank = -1;
  long pid = 0;
  std::string state;
  std::optional<double> heartbeat_age_s;
  std::string cause;
  std::optional<bool> straggler;  // the straggler watch's verdict; nullopt: not sampled
  std::optional<double> running_share;
};

struct NodeRow {
  std::string node;
  std::string record;  // as read, for --json
  bool readable = true;  // false: not JSON, or a record cxxrunctl does not know
  std::string host;
  long pid = 0;
  int group_rank = -1;
  int round = 0;
  std::string phase;
  std::string state;
  int attempt = 0;
  int restarts = 0;
  int max_restarts = 0;
  bool node_healthy = true;
  bool straggler = false;  // the job names this node a straggler
  std::string health;  // a failed check, or ""
  std::string hang;    // the last hang verdict's words, or ""
  std::optional<long long> step;
  std::optional<double> progress_age_s;
  long long updated_ms = 0;
  int ranks_left_out = 0;
  std::vector<RankRow> ranks;
};

// The rows of (node id, record) pairs as job_board's read() gives them.
std::vector<NodeRow> rows_of(const std::vector<std::pair<std::string, std::string>>& records);

// status: a line per node, then a line per rank under it. `now_ms`: the
// wall clock, for the records' ages.
std::string status_text(const std::string& run_id, const std::vector<NodeRow>& nodes, long long now_ms);
// status --json: {"run_id", "read_ms", "nodes": [each record, with
// "updated_age_s"]}, one line.
std::string status_json(const std::string& run_id, const std::vector<NodeRow>& nodes, long long now_ms);
// top: a header and one line a rank, the stalest first (the oldest of its
// heartbeat, its node's progress and its node's record), at most
// `max_lines` rank lines (the terminal's height).
std::string top_frame(const std::string& run_id, const std::vector<NodeRow>& nodes, long long now_ms,
                      size_t max_lines);

}  // namespace cxxrun::ctl
