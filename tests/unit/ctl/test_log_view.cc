// What `cxxrunctl logs` prints of the agents' answers (ctl/log_view.h).
#include <catch2/catch.hpp>

#include "ctl/log_view.h"

using namespace cxxrun::ctl;

TEST_CASE("log view: lines of every node merged by time, each with its rank, and where to go on") {
  const std::map<std::string, std::string> answers = {
      {"a", R"({"node":"a","host":"h","ranks":[{"rank":0,"from":0,"to":20,"lost":0,"lines":[[10,"a0"],[30,"a1"]]}]})"},
      {"b", R"({"node":"b","host":"h","ranks":[{"rank":1,"from":5,"to":9,"lost":5,"lines":[[20,"b0"],[30,"b1"]]}]})"},
  };
  const LogBatch all = merge_logs(answers, -1);
  CHECK(all.lines == "[rank0]: a0\n[rank1]: b0\n[rank0]: a1\n[rank1]: b1\n");
  CHECK(all.next == std::map<int, long long>{{0, 20}, {1, 9}});
  REQUIRE(all.notes.size() == 1);
  CHECK(all.notes[0] == "rank 1: 5 bytes of output were older than its agent keeps");
  const LogBatch one = merge_logs(answers, 1);
  CHECK(one.lines == "[rank1]: b0\n[rank1]: b1\n");
  CHECK(one.next.count(0) == 0);
}

TEST_CASE("log view: an answer it cannot read, or an agent's refusal, is a note") {
  const LogBatch b = merge_logs({{"x", "garbage"}, {"y", R"({"node":"y","error":"no"})"}}, -1);
  CHECK(b.lines.empty());
  CHECK(b.notes.size() == 2);
}
