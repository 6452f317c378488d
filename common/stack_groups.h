// Ranks grouped by where each one waits, and the line that says so: what a
// hang verdict prints (agent/hang/culprit.h) and what `cxxrunctl stacks`
// prints after every rank's stack (docs/cxxrunctl.md). One home, so that the
// two cannot word it differently: the agent finds where each rank waits in
// its stack (agent/hang/culprit.h, where_it_waits), and whoever holds those
// places, the agent for its node or cxxrunctl for the job, groups them here.
// Pure, headers only (common/ has no code of its own to link).
//
// A rank stands apart only when its place differs from every other rank's
// while those others share theirs: it is alone in its group and every other
// group has two ranks or more. A 2-2 split, a 1-1 split, ranks all at the
// same place: no rank stands apart.
#pragma once

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cxxrun::stacks {

// "0–2" (an en dash) for three or more consecutive ranks, "0, 2, 5", "3".
inline std::string rank_list(const std::vector<int>& ranks) {
  std::vector<int> r = ranks;
  std::sort(r.begin(), r.end());
  if (r.empty()) return "";
  bool consecutive = true;
  for (size_t i = 1; i < r.size(); ++i) consecutive = consecutive && r[i] == r[i - 1] + 1;
  if (consecutive && r.size() > 2) return std::to_string(r.front()) + "\u2013" + std::to_string(r.back());
  std::string out;
  for (int x : r) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

struct Groups {
  struct Group {
    std::string where;
    std::vector<int> ranks;  // ascending
  };
  std::vector<Group> groups;  // by their lowest rank
  std::vector<int> without;   // ranks without a stack
  // "ranks 0–2 wait in all_reduce at w.py:61; rank 3 waits in wedge at
  // w.py:78"; ranks without a stack are named as such.
  std::string line;
  // The same, one entry a group (ranks without a stack last): what the
  // failure summary lists when no rank could be named as the cause.
  std::vector<std::string> group_lines;
  std::optional<int> apart;  // the rank that stands apart, when one does
};

// `where`: global rank -> where it waits ("all_reduce at w.py:61"; "" when
// it has no stack).
inline Groups group_by_place(const std::map<int, std::string>& where) {
  std::map<std::string, std::vector<int>> by_place;
  Groups p;
  for (const auto& [rank, at] : where) {
    if (at.empty()) p.without.push_back(rank);
    else by_place[at].push_back(rank);
  }
  for (auto& [at, ranks] : by_place) p.groups.push_back({at, ranks});
  std::sort(p.groups.begin(), p.groups.end(), [](const auto& a, const auto& b) { return a.ranks[0] < b.ranks[0]; });

  int alone = 0;
  for (const auto& g : p.groups) {
    p.group_lines.push_back(std::string(g.ranks.size() == 1 ? "rank " : "ranks ") + rank_list(g.ranks) +
                            (g.ranks.size() == 1 ? " waits in " : " wait in ") + g.where);
    p.line += (p.line.empty() ? "" : "; ") + p.group_lines.back();
    if (g.ranks.size() == 1) {
      ++alone;
      p.apart = g.ranks[0];
    }
  }
  if (alone != 1 || p.groups.size() < 2) p.apart.reset();
  if (!p.without.empty()) {
    p.group_lines.push_back(std::string(p.without.size() == 1 ? "rank " : "ranks ") + rank_list(p.without) +
                            ": no stack");
    p.line += (p.line.empty() ? "" : "; ") + p.group_lines.back();
  }
  return p;
}

}  // namespace cxxrun::stacks
