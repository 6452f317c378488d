// What cxxrunctl prints of the board (ctl/board_view.h).
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "ctl/board_view.h"

using namespace cxxrun::ctl;

namespace {

const long long kNow = 1700000010000;

std::string board_record_of(int group_rank, long long updated_ms, const std::string& ranks) {
  return R"({"v":1,"node":"n)" + std::to_string(group_rank) + R"(","host":"h)" + std::to_string(group_rank) +
         R"(","pid":)" + std::to_string(100 + group_rank) + R"(,"group_rank":)" + std::to_string(group_rank) +
         R"(,"round":0,"phase":"running","state":"HEALTHY","attempt":0,"restarts":0,"max_restarts":2,)"
         R"("node_healthy":true,"step":null,"progress_age_s":null,"updated_ms":)" +
         std::to_string(updated_ms) + R"(,"ranks":)" + ranks + "}";
}

}  // namespace

TEST_CASE("board view: rows by group rank, an unreadable record kept and named") {
  const auto rows = rows_of({{"b", board_record_of(1, kNow, R"([{"rank":2,"local_rank":0,"pid":7,"state":"running",
                                                       "heartbeat_age_s":0.5}])")},
                             {"a", board_record_of(0, kNow, "[]")},
                             {"junk", "not json"}});
  REQUIRE(rows.size() == 3);
  CHECK_FALSE(rows[0].readable);  // group rank -1 sorts first
  CHECK(rows[1].node == "a");
  CHECK(rows[2].ranks.at(0).pid == 7);
  CHECK(*rows[2].ranks.at(0).heartbeat_age_s == 0.5);
  const std::string text = status_text("j", rows, kNow);
  CHECK(text.find("job j: 3 nodes, 1 rank\n") == 0);
  CHECK(text.find("node junk: its record is not one cxxrunctl reads") != std::string::npos);
  CHECK(text.find("  rank 2 local=0 pid=7 running heartbeat=0.5s") != std::string::npos);
}

TEST_CASE("board view: the straggler verdicts, where the agent sampled them") {
  const auto rows = rows_of({{"a", R"({"v":1,"group_rank":0,"state":"HEALTHY","phase":"running","straggler":true,)"
                                   R"("updated_ms":1700000010000,"ranks":[{"rank":0,"pid":1,"state":"running",)"
                                   R"("straggler":true,"running_share":0.4},{"rank":1,"pid":2,"state":"running"}]})"}});
  const std::string text = status_text("j", rows, kNow);
  CHECK(text.find(" STRAGGLER updated=") != std::string::npos);
  CHECK(text.find("  rank 0 local=-1 pid=1 running heartbeat=- straggler=YES (running 40%)\n") != std::string::npos);
  CHECK(text.find("  rank 1 local=-1 pid=2 running heartbeat=-\n") != std::string::npos);
  const std::string frame = top_frame("j", rows, kNow, 10);
  CHECK(frame.find("STRAGGLER") != std::string::npos);
  CHECK(frame.find("      YES") != std::string::npos);
}

TEST_CASE("board view: a node that stopped updating shows as stale") {
  const auto rows = rows_of({{"a", board_record_of(0, kNow - 60000, "[]")}});
  CHECK(status_text("j", rows, kNow).find("STALE (no update for 60s)") != std::string::npos);
  const auto j = nlohmann::json::parse(status_json("j", rows, kNow));
  CHECK(j["nodes"][0]["updated_age_s"] == 60.0);
  CHECK(j["run_id"] == "j");
}

TEST_CASE("board view: top puts the stalest rank first and fits the terminal") {
  const auto rows = rows_of(
      {{"a", board_record_of(0, kNow, R"([{"rank":0,"pid":1,"state":"running","heartbeat_age_s":0.1},
                                 {"rank":1,"pid":2,"state":"running","heartbeat_age_s":9.0}])")},
       {"b", board_record_of(1, kNow, R"([{"rank":2,"pid":3,"state":"running","heartbeat_age_s":3.0}])")}});
  const std::string frame = top_frame("j", rows, kNow, 2);
  const auto first = frame.find("\n", frame.find("RANK")) + 1;
  CHECK(frame.substr(first, 7) == "     1 ");
  CHECK(frame.find("     2 ", first) < frame.find("(1 more ranks)"));
  CHECK(frame.find("     0     0") == std::string::npos);  // the freshest did not fit
}
