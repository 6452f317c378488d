// What `cxxrunctl stacks` prints of the agents' answers (ctl/stack_view.h),
// and the grouping line it shares with the hang verdict (common/stack_groups.h).
#include <catch2/catch.hpp>

#include "common/stack_groups.h"
#include "ctl/stack_view.h"

using namespace cxxrun::ctl;

namespace {
std::string rank(int r, int pid, const std::string& where, const std::string& stack, int cut = 0) {
  return R"({"rank":)" + std::to_string(r) + R"(,"pid":)" + std::to_string(pid) + R"(,"where":")" + where +
         R"(","cut":)" + std::to_string(cut) + R"(,"stack":")" + stack + R"("})";
}
}  // namespace

TEST_CASE("stack view: every rank's stack across nodes with its pid and host, then the grouping line") {
  const std::map<std::string, std::string> answers = {
      {"b", R"({"node":"b","host":"hb","dropped":[],"ranks":[)" + rank(2, 12, "ar at w.py:5", "S2\\n") + "," +
                rank(3, 13, "wedge at w.py:9", "S3\\n") + "]}"},
      {"a", R"({"node":"a","host":"ha","dropped":[],"ranks":[)" + rank(0, 10, "ar at w.py:5", "S0\\n") + "," +
                rank(1, 11, "ar at w.py:5", "S1", 40) + "]}"},
  };
  const StackReport all = render_stacks(answers, -1);
  CHECK(all.ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(all.text ==
        "rank 0 pid=10 host=ha node=a: waits in ar at w.py:5\nS0\n\n"
        "rank 1 pid=11 host=ha node=a: waits in ar at w.py:5\nS1\n"
        "  (40 bytes of this stack were cut to fit the answer)\n\n"
        "rank 2 pid=12 host=hb node=b: waits in ar at w.py:5\nS2\n\n"
        "rank 3 pid=13 host=hb node=b: waits in wedge at w.py:9\nS3\n\n"
        "rank 3 stands apart; ranks 0\u20132 wait in ar at w.py:5; rank 3 waits in wedge at w.py:9\n");
  REQUIRE(all.notes.size() == 1);
  CHECK(all.notes[0].find("rank 1: 40 bytes") == 0);

  const StackReport one = render_stacks(answers, 2);
  CHECK(one.ranks == std::vector<int>{2});
  CHECK(one.text == "rank 2 pid=12 host=hb node=b: waits in ar at w.py:5\nS2\n\nrank 2 waits in ar at w.py:5\n");
}

TEST_CASE("stack view: an agent that does not read the request, a dropped rank, an answer not understood") {
  const StackReport r = render_stacks(
      {{"a", R"({"node":"a","host":"h","error":"this agent does not read that request"})"},
       {"b", R"({"node":"b","host":"h","ranks":[],"dropped":[4,5]})"},
       {"c", "garbage"}},
      -1);
  CHECK(r.ranks.empty());
  CHECK(r.text.empty());
  REQUIRE(r.notes.size() == 3);
  CHECK(r.notes[0].find("node a: this agent does not read that request") == 0);
  CHECK(r.notes[1] == "node b: the stacks of ranks 4, 5 did not fit its answer");
  CHECK(r.notes[2] == "node c: an answer that is not JSON");
}

TEST_CASE("stack groups: the hang verdict's grouping, and who stands apart") {
  using cxxrun::stacks::group_by_place;
  const auto p = group_by_place({{0, "x"}, {1, "x"}, {2, "y"}, {3, ""}});
  CHECK(p.line == "ranks 0, 1 wait in x; rank 2 waits in y; rank 3: no stack");
  CHECK(p.apart == 2);
  CHECK_FALSE(group_by_place({{0, "x"}, {1, "y"}}).apart);
  CHECK_FALSE(group_by_place({{0, "x"}, {1, "x"}}).apart);
}
