// What `cxxrunctl logs` reads of this node's ranks: the last lines each rank
// wrote (stdout and stderr, as the console shows them, without the prefix),
// kept in memory whether or not the output also goes to log files
// (--redirects/--tee), so every job can be asked, --log-dir=/dev/null too.
// Each rank's stream is numbered by byte offset from the agent's start
// (a line counts its bytes and one for its end), so a follower asks for
// what came after the offset it has, across attempts; lines older than the
// kept window are gone, and an answer says how many bytes were lost.
//
// answer() is one line of JSON, at most `limit` bytes, for one request
// (docs/cxxrunctl.md, "logs").
#pragma once

#include <cstddef>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace cxxrun::agent {

// Per rank, this many bytes of its latest lines are kept.
inline constexpr size_t kRankOutputBytes = 256 * 1024;
// A line longer than this is cut (its offset still counts every byte).
inline constexpr size_t kRankOutputLine = 4096;

class RankOutput {
 public:
  void add(int rank, std::string_view line, long long wall_ms);

  // A logs request: which ranks (`rank` < 0: all), and for each rank the
  // offset to go on from (none: the latest lines that fit).
  struct Request {
    int rank = -1;
    std::map<int, long long> from;
  };
  // nullopt: not a logs request this agent reads.
  static std::optional<Request> parse(const std::string& json_text);

  std::string answer(const Request& request, const std::string& node, const std::string& host, size_t limit) const;

 private:
  struct Line {
    long long offset;  // of the line's first byte
    long long ms;
    std::string text;
  };
  struct Stream {
    std::deque<Line> lines;
    size_t held = 0;       // bytes of text in `lines`
    long long end = 0;     // offset after the last line
  };
  static size_t cost(const Line& l);

  std::map<int, Stream> ranks_;
};

}  // namespace cxxrun::agent
