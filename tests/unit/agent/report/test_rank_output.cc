// The ranks' output that `cxxrunctl logs` reads (agent/report/rank_output.h):
// offsets a follower goes on from, the kept window, the answer's bound.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "agent/report/rank_output.h"

using namespace cxxrun::agent;
using nlohmann::json;

namespace {

json ask_output(const RankOutput& out, RankOutput::Request r, size_t limit = 65536) {
  return json::parse(out.answer(r, "node-a", "h", limit));
}

std::vector<std::string> texts(const json& rank) {
  std::vector<std::string> t;
  for (const auto& l : rank["lines"]) t.push_back(l[1].get<std::string>());
  return t;
}

}  // namespace

TEST_CASE("rank output: a follower gets each line once, from the offset it has") {
  RankOutput out;
  out.add(1, "step 0", 1000);
  json a = ask_output(out, {});
  REQUIRE(a["ranks"].size() == 1);
  CHECK(texts(a["ranks"][0]) == std::vector<std::string>{"step 0"});
  CHECK(a["ranks"][0]["to"] == 7);  // "step 0" and its end
  out.add(1, "step 1", 1001);
  out.add(1, "step 2", 1002);
  json b = ask_output(out, {-1, {{1, a["ranks"][0]["to"].get<long long>()}}});
  CHECK(texts(b["ranks"][0]) == std::vector<std::string>{"step 1", "step 2"});
  CHECK(b["ranks"][0]["from"] == 7);
  CHECK(b["ranks"][0]["to"] == 21);
  CHECK(b["ranks"][0]["lost"] == 0);
  json c = ask_output(out, {-1, {{1, 21}}});
  CHECK(texts(c["ranks"][0]).empty());
  CHECK(c["ranks"][0]["to"] == 21);
  CHECK(b["ranks"][0]["lines"][0][0] == 1001);  // when the agent read it
}

TEST_CASE("rank output: one rank, and the request as cxxrunctl writes it") {
  RankOutput out;
  out.add(0, "zero", 1);
  out.add(3, "three", 2);
  auto r = RankOutput::parse(R"({"op":"logs","rank":3,"from":{"0":0}})");
  REQUIRE(r);
  CHECK(r->rank == 3);
  CHECK(r->from.at(0) == 0);
  json a = ask_output(out, *r);
  REQUIRE(a["ranks"].size() == 1);
  CHECK(a["ranks"][0]["rank"] == 3);
  CHECK_FALSE(RankOutput::parse(R"({"op":"stacks"})"));
  CHECK_FALSE(RankOutput::parse("not json"));
}

TEST_CASE("rank output: older lines leave the window, and a follower is told how much it lost") {
  RankOutput out;
  const std::string line(1000, 'x');
  for (int i = 0; i < 400; ++i) out.add(0, line, i);  // 400 KB, more than kept
  json a = ask_output(out, {-1, {{0, 0}}});
  const long long kept_from = a["ranks"][0]["from"].get<long long>();
  CHECK(kept_from > 0);
  CHECK(a["ranks"][0]["lost"] == kept_from);
  CHECK(400 * 1001 - kept_from <= static_cast<long long>(kRankOutputBytes) + 1001);
}

TEST_CASE("rank output: an answer stays within its bound, and the rest comes next time") {
  RankOutput out;
  for (int i = 0; i < 2000; ++i) out.add(0, "line " + std::to_string(i), i);
  const std::string text = out.answer({-1, {{0, 0}}}, "n", "h", 4096);
  CHECK(text.size() <= 4096);
  const json a = json::parse(text);
  const long long to = a["ranks"][0]["to"].get<long long>();
  CHECK(to > 0);
  const json b = ask_output(out, {-1, {{0, to}}}, 4096);
  CHECK(b["ranks"][0]["lines"][0][1] == "line " + std::to_string(a["ranks"][0]["lines"].size()));
  // Without an offset: the latest lines.
  const json c = ask_output(out, {}, 4096);
  CHECK(c["ranks"][0]["lines"].back()[1] == "line 1999");
  CHECK(c["ranks"][0]["to"] == 18890);  // the end of the stream: every byte of "line 0".."line 1999"
}

TEST_CASE("rank output: a very long line is cut, its offset counts every byte") {
  RankOutput out;
  out.add(0, std::string(10000, 'y'), 1);
  const json a = ask_output(out, {});
  CHECK(a["ranks"][0]["lines"][0][1].get<std::string>().size() <= kRankOutputLine + 3);
  CHECK(a["ranks"][0]["to"] == 10001);
}
