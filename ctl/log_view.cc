#include "ctl/log_view.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace cxxrun::ctl {

LogBatch merge_logs(const std::map<std::string, std::string>& answers, int only_rank) {
  using nlohmann::json;
  struct Line {
    long long ms;
    int rank;
    size_t order;  // within its rank: as written
    std::string text;
  };
  std::vector<Line> all;
  LogBatch out;
  for (const auto& [node, text] : answers) {
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded() || !j.is_object()) {
      out.notes.push_back("node " + node + ": an answer cxxrunctl does not read");
      continue;
    }
    if (j.contains("error")) {
      out.notes.push_back("node " + node + ": " + j["error"].dump());
      continue;
    }
    try {
      for (const json& r : j.at("ranks")) {
        const int rank = r.at("rank").get<int>();
        if (only_rank >= 0 && rank != only_rank) continue;
        out.next[rank] = r.at("to").get<long long>();
        if (const long long lost = r.value("lost", 0LL); lost > 0)
          out.notes.push_back(fmt::format("rank {}: {} bytes of output were older than its agent keeps", rank, lost));
        size_t order = 0;
        for (const json& l : r.at("lines"))
          all.push_back({l.at(0).get<long long>(), rank, order++, l.at(1).get<std::string>()});
      }
    } catch (const json::exception&) {
      out.notes.push_back("node " + node + ": an answer cxxrunctl does not read");
    }
  }
  std::stable_sort(all.begin(), all.end(), [](const Line& a, const Line& b) {
    return std::tie(a.ms, a.rank, a.order) < std::tie(b.ms, b.rank, b.order);
  });
  for (const Line& l : all) out.lines += fmt::format("[rank{}]: {}\n", l.rank, l.text);
  return out;
}

}  // namespace cxxrun::ctl
