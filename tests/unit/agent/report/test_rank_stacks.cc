// What an agent answers to `cxxrunctl stacks` (agent/report/rank_stacks.h).
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "agent/report/rank_stacks.h"

using namespace cxxrun::agent;
using json = nlohmann::json;

namespace {

// faulthandler's text: a helper thread first, the main thread last.
std::string python_stack(const std::string& function, int line, int helper_frames = 0) {
  std::string text = "Thread 0x00007f0000000001 (most recent call first):\n";
  for (int i = 0; i < helper_frames; ++i)
    text += "  File \"/usr/lib/python3.11/threading.py\", line " + std::to_string(100 + i) + " in helper_" +
            std::to_string(i) + "\n";
  text += "\nCurrent thread 0x00007f0000000002 (most recent call first):\n";
  text += "  File \"/job/w.py\", line " + std::to_string(line) + " in " + function + "\n";
  text += "  File \"/job/w.py\", line 90 in <module>\n";
  return text;
}

}  // namespace

TEST_CASE("rank stacks: the request's words") {
  CHECK(parse_stacks_request(R"({"op":"stacks","rank":-1})")->rank == -1);
  CHECK(parse_stacks_request(R"({"op":"stacks","rank":3})")->rank == 3);
  CHECK(parse_stacks_request(R"({"op":"stacks"})")->rank == -1);
  CHECK_FALSE(parse_stacks_request(R"({"op":"logs","rank":3})"));
  CHECK_FALSE(parse_stacks_request(R"({"op":"stacks","rank":"x"})"));
  CHECK_FALSE(parse_stacks_request("not json"));
}

TEST_CASE("rank stacks: each rank's pid, where it waits and its whole stack when it fits") {
  const std::vector<RankStack> taken = {{0, 100, python_stack("wedge", 7)}, {1, 101, ""}};
  const json a = json::parse(stacks_answer({}, taken, "n1", "h1", 64 * 1024));
  CHECK(a["node"] == "n1");
  CHECK(a["host"] == "h1");
  REQUIRE(a["ranks"].size() == 2);
  CHECK(a["ranks"][0]["rank"] == 0);
  CHECK(a["ranks"][0]["pid"] == 100);
  CHECK(a["ranks"][0]["where"] == "wedge at w.py:7");
  CHECK(a["ranks"][0]["stack"] == python_stack("wedge", 7));
  CHECK(a["ranks"][0]["cut"] == 0);
  CHECK(a["ranks"][1]["where"] == "");
  CHECK(a["dropped"].empty());
  const json one = json::parse(stacks_answer({1}, taken, "n1", "h1", 64 * 1024));
  REQUIRE(one["ranks"].size() == 1);
  CHECK(one["ranks"][0]["rank"] == 1);
}

TEST_CASE("rank stacks: a long stack is cut to the bound, keeps the main thread, and still groups by it") {
  const std::string long_one = python_stack("wedge", 7, 2000);
  const std::vector<RankStack> taken = {{0, 100, long_one}, {1, 101, python_stack("short_one", 9)}};
  const size_t limit = 4096;
  const std::string text = stacks_answer({}, taken, "n1", "h1", limit);
  CHECK(text.size() <= limit);
  const json a = json::parse(text);
  const std::string kept = a["ranks"][0]["stack"];
  CHECK(kept.find("line 7 in wedge") != std::string::npos);  // the main thread, listed last, is kept
  CHECK(a["ranks"][0]["cut"].get<size_t>() == long_one.size() - kept.size());
  CHECK(a["ranks"][0]["cut"].get<size_t>() > 0);
  CHECK(a["ranks"][0]["where"] == "wedge at w.py:7");
  // The short stack needed less than half: it is whole, and the long one had the rest.
  CHECK(a["ranks"][1]["stack"] == python_stack("short_one", 9));
  CHECK(a["ranks"][1]["cut"] == 0);
  CHECK(kept.size() > limit / 2);
}

TEST_CASE("rank stacks: ranks whose bare entries do not fit are dropped and named; bytes that are not UTF-8 pass") {
  std::vector<RankStack> taken;
  for (int r = 0; r < 100; ++r) taken.push_back({r, 1000 + r, python_stack("wedge", 7) + "\xff\xfe"});
  const std::string text = stacks_answer({}, taken, "n1", "h1", 2048);
  CHECK(text.size() <= 2048);
  const json a = json::parse(text);
  CHECK_FALSE(a["ranks"].empty());
  CHECK(a["ranks"].size() + a["dropped"].size() == 100);
  CHECK(a["dropped"].back() == 99);
}
