#include "ctl/stack_view.h"

#include <nlohmann/json.hpp>

#include "common/stack_groups.h"

namespace cxxrun::ctl {
namespace {

using json = nlohmann::json;

struct Shown {
  long long pid = 0;
  std::string host, node, where, stack;
  long long cut = 0;
};

}  // namespace

StackReport render_stacks(const std::map<std::string, std::string>& answers, int rank) {
  StackReport report;
  std::map<int, Shown> ranks;
  for (const auto& [node, text] : answers) {
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      report.notes.push_back("node " + node + ": an answer that is not JSON");
      continue;
    }
    if (j.contains("error")) {
      report.notes.push_back("node " + node + ": " + j.value("error", std::string("?")) +
                             " (an agent older than this cxxrunctl?)");
      continue;
    }
    const std::string host = j.value("host", std::string("?"));
    try {
      for (const auto& r : j.at("ranks")) {
        const int at = r.at("rank").get<int>();
        if (rank >= 0 && at != rank) continue;
        ranks[at] = Shown{r.value("pid", 0LL), host, node, r.value("where", std::string()),
                          r.value("stack", std::string()), r.value("cut", 0LL)};
      }
      std::vector<int> dropped;
      for (const auto& d : j.value("dropped", json::array())) dropped.push_back(d.get<int>());
      if (!dropped.empty())
        report.notes.push_back("node " + node + ": the stacks of " + (dropped.size() == 1 ? "rank " : "ranks ") +
                               stacks::rank_list(dropped) + " did not fit its answer");
    } catch (const json::exception& e) {
      report.notes.push_back("node " + node + ": an answer not understood (" + e.what() + ")");
    }
  }
  std::map<int, std::string> where;
  for (const auto& [r, s] : ranks) {
    report.ranks.push_back(r);
    where[r] = s.where;
    report.text += "rank " + std::to_string(r) + " pid=" + std::to_string(s.pid) + " host=" + s.host +
                   " node=" + s.node + ": " + (s.where.empty() ? "no stack" : "waits in " + s.where) + "\n";
    report.text += s.stack.empty() ? "  (no stack could be taken)\n" : s.stack;
    if (!s.stack.empty() && s.stack.back() != '\n') report.text += "\n";
    if (s.cut > 0) {
      report.text += "  (" + std::to_string(s.cut) + " bytes of this stack were cut to fit the answer)\n";
      report.notes.push_back("rank " + std::to_string(r) + ": " + std::to_string(s.cut) +
                             " bytes of its stack were cut to fit the answer (the main thread's end is kept)");
    }
    report.text += "\n";
  }
  const stacks::Groups g = stacks::group_by_place(where);
  if (!g.line.empty())
    report.text += (g.apart ? "rank " + std::to_string(*g.apart) + " stands apart; " : std::string()) + g.line + "\n";
  return report;
}

}  // namespace cxxrun::ctl
