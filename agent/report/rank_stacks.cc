#include "agent/report/rank_stacks.h"

#include <algorithm>
#include <numeric>

#include <nlohmann/json.hpp>

#include "agent/hang/culprit.h"

namespace cxxrun::agent {
namespace {

using json = nlohmann::json;

// Stacks are whatever a dump wrote: bytes that are not UTF-8 become U+FFFD
// rather than an exception.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Bytes `text` adds inside a JSON string.
size_t escaped(const std::string& text) { return dump(json(text)).size() - 2; }

// Whether the main thread comes last in `stack`: Python's faulthandler
// lists the newest thread first and the main thread last; eu-stack lists
// the main thread (TID = PID) first.
bool main_thread_last(const std::string& stack) { return stack.find("(most recent call first)") != std::string::npos; }

// The whole lines of `stack` that fit in `budget` escaped bytes, from the
// main thread's end; how many bytes were left out.
std::pair<std::string, size_t> cut_to(const std::string& stack, size_t budget) {
  if (escaped(stack) <= budget) return {stack, 0};
  std::vector<std::string> lines;
  for (size_t at = 0; at < stack.size();) {
    const size_t end = stack.find('\n', at);
    const size_t next = end == std::string::npos ? stack.size() : end + 1;
    lines.push_back(stack.substr(at, next - at));
    at = next;
  }
  const bool from_end = main_thread_last(stack);
  if (from_end) std::reverse(lines.begin(), lines.end());
  std::vector<std::string> kept;
  size_t used = 0;
  for (const auto& l : lines) {
    const size_t cost = escaped(l);
    if (used + cost > budget) break;
    used += cost;
    kept.push_back(l);
  }
  if (from_end) std::reverse(kept.begin(), kept.end());
  std::string text;
  for (const auto& l : kept) text += l;
  return {text, stack.size() - text.size()};
}

}  // namespace

std::optional<StacksRequest> parse_stacks_request(const std::string& json_text) {
  const json j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("op", "") != "stacks") return std::nullopt;
  StacksRequest r;
  if (auto rank = j.find("rank"); rank != j.end()) {
    if (!rank->is_number_integer()) return std::nullopt;
    r.rank = rank->get<int>();
  }
  return r;
}

std::string stacks_answer(const StacksRequest& request, const std::vector<RankStack>& stacks, const std::string& node,
                          const std::string& host, size_t limit) {
  struct Entry {
    const RankStack* stack;
    json j;          // without its text
    size_t bare = 0;  // the entry's bytes with an empty text, and its comma
  };
  std::vector<Entry> entries;
  for (const RankStack& s : stacks) {
    if (request.rank >= 0 && s.rank != request.rank) continue;
    json j = {{"rank", s.rank}, {"pid", s.pid}, {"where", where_it_waits(main_thread_frames(s.text))}, {"cut", 0},
              {"stack", ""}};
    // "cut" may grow to as many digits as the text has bytes.
    const size_t bare = dump(j).size() + 1 + std::to_string(s.text.size()).size();
    entries.push_back({&s, std::move(j), bare});
  }
  json answer = {{"node", node}, {"host", host}, {"ranks", json::array()}, {"dropped", json::array()}};
  size_t used = dump(answer).size();
  // What the bare entries leave; ranks whose entries do not fit are dropped,
  // and named in "dropped", which takes its room too.
  size_t named = 0;  // "dropped"'s bytes if every rank were in it
  for (const auto& e : entries) named += std::to_string(e.stack->rank).size() + 1;
  size_t kept = 0;
  for (; kept < entries.size(); ++kept) {
    const size_t in_dropped = std::to_string(entries[kept].stack->rank).size() + 1;
    if (used + entries[kept].bare + named - in_dropped > limit) break;
    used += entries[kept].bare;
    named -= in_dropped;
  }
  used += named;
  for (size_t i = kept; i < entries.size(); ++i) answer["dropped"].push_back(entries[i].stack->rank);
  entries.resize(kept);
  // The rest is shared out, the shortest stacks first: what one needs less
  // than its share goes to those after it.
  std::vector<size_t> order(entries.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<size_t> need(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) need[i] = escaped(entries[i].stack->text);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return need[a] < need[b]; });
  size_t left = limit > used ? limit - used : 0;
  for (size_t k = 0; k < order.size(); ++k) {
    Entry& e = entries[order[k]];
    const size_t share = left / (order.size() - k);
    auto [text, cut] = cut_to(e.stack->text, share);
    left -= escaped(text);
    e.j["stack"] = std::move(text);
    e.j["cut"] = cut;
  }
  for (auto& e : entries) answer["ranks"].push_back(std::move(e.j));
  return dump(answer);
}

}  // namespace cxxrun::agent
