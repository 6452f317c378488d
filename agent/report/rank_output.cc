#include "agent/report/rank_output.h"

#include <algorithm>

#include <nlohmann/json.hpp>

namespace cxxrun::agent {
namespace {

using nlohmann::json;

std::string cut_line(std::string_view text) {
  if (text.size() <= kRankOutputLine) return std::string(text);
  size_t n = kRankOutputLine;
  while (n > 0 && (static_cast<unsigned char>(text[n]) & 0xC0) == 0x80) --n;
  return std::string(text.substr(0, n)) + "...";
}

}  // namespace

void RankOutput::add(int rank, std::string_view line, long long wall_ms) {
  Stream& s = ranks_[rank];
  Line l{s.end, wall_ms, cut_line(line)};
  s.end += static_cast<long long>(line.size()) + 1;
  s.held += l.text.size();
  s.lines.push_back(std::move(l));
  while (s.held > kRankOutputBytes && s.lines.size() > 1) {
    s.held -= s.lines.front().text.size();
    s.lines.pop_front();
  }
}

std::optional<RankOutput::Request> RankOutput::parse(const std::string& text) {
  const json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("op", "") != "logs") return std::nullopt;
  Request r;
  try {
    r.rank = j.value("rank", -1);
    if (auto from = j.find("from"); from != j.end() && from->is_object())
      for (const auto& [rank, offset] : from->items()) r.from[std::stoi(rank)] = offset.get<long long>();
  } catch (const std::exception&) {
    return std::nullopt;
  }
  return r;
}

// What one line adds to an answer: its text as JSON, its time, the brackets.
size_t RankOutput::cost(const Line& l) { return json(l.text).dump().size() + 24; }

std::string RankOutput::answer(const Request& request, const std::string& node, const std::string& host,
                               size_t limit) const {
  std::vector<const std::pair<const int, Stream>*> asked;
  for (const auto& entry : ranks_)
    if (request.rank < 0 || entry.first == request.rank) asked.push_back(&entry);
  // Each rank gets an equal share of the bound, less the envelope's; a rank
  // that needs less leaves nothing to the others: simple, and a follower
  // asks again within a second.
  const size_t envelope = 256 + node.size() + host.size();
  const size_t share = asked.empty() || limit <= envelope ? 0 : (limit - envelope) / asked.size();
  json ranks = json::array();
  for (const auto* entry : asked) {
    const int rank = entry->first;
    const Stream& s = entry->second;
    const long long kept_from = s.lines.empty() ? s.end : s.lines.front().offset;
    auto from = request.from.find(rank);
    // Which lines: from the asked offset on, or the latest that fit.
    size_t first = 0;
    if (from != request.from.end()) {
      first = static_cast<size_t>(std::lower_bound(s.lines.begin(), s.lines.end(), from->second,
                                                   [](const Line& l, long long o) { return l.offset < o; }) -
                                  s.lines.begin());
    } else {
      size_t bytes = 64;
      first = s.lines.size();
      while (first > 0 && bytes + cost(s.lines[first - 1]) <= share) bytes += cost(s.lines[--first]);
    }
    json lines = json::array();
    size_t bytes = 64;
    size_t i = first;
    for (; i < s.lines.size(); ++i) {
      if (bytes + cost(s.lines[i]) > share) break;
      bytes += cost(s.lines[i]);
      lines.push_back(json::array({s.lines[i].ms, s.lines[i].text}));
    }
    const long long start = first < s.lines.size() ? s.lines[first].offset : s.end;
    const long long to = i < s.lines.size() ? s.lines[i].offset : s.end;
    long long lost = 0;
    if (from != request.from.end() && from->second < kept_from) lost = kept_from - from->second;
    ranks.push_back({{"rank", rank}, {"from", start}, {"to", to}, {"lost", lost}, {"lines", lines}});
  }
  return json{{"node", node}, {"host", host}, {"ranks", ranks}}.dump();
}

}  // namespace cxxrun::agent
