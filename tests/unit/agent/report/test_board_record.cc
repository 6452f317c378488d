// This node's record on the job board (agent/report/board_record.h): its
// fields, and that it stays within its bound however many ranks or words.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "agent/report/board_record.h"
#include "rendezvous/job_board.h"

using namespace cxxrun::agent;
using nlohmann::json;

namespace {

BoardFacts facts() {
  BoardFacts f;
  f.node = "h1-42-1000";
  f.host = "h1";
  f.agent_pid = 42;
  f.round = 3;
  f.phase = "running";
  f.attempt = 1;
  f.step = 120;
  f.seconds_since_progress = 0.5;
  f.updated_ms = 1700000000000;
  return f;
}

HealthSnapshot snapshot(int ranks) {
  HealthSnapshot s;
  s.state = GroupState::healthy;
  s.group_rank = 1;
  s.group_world_size = 2;
  s.restart_count = 1;
  s.max_restarts = 3;
  for (int i = 0; i < ranks; ++i) {
    WorkerHealth w;
    w.local_rank = i;
    w.rank = 100 + i;
    w.pid = 5000 + i;
    w.seconds_since_heartbeat = 1.25;
    s.workers.push_back(w);
  }
  return s;
}

}  // namespace

TEST_CASE("board record: the node, the supervisor's state and every rank") {
  HealthSnapshot s = snapshot(2);
  s.workers[1].state = WorkerRunState::failed;
  s.workers[1].cause = "oom-killed";
  s.workers[1].cause_detail = "the memory cgroup's limit";
  s.checks.push_back({"disk", false, "/ is 99% full", 0.1});
  s.speeds.node_straggler = true;
  s.speeds.ranks.push_back({1, 101, 0.25, 1.5, true});
  const std::string text = board_record(facts(), s, cxxrun::rendezvous::board::kMaxRecordBytes);
  CHECK(text.find('\n') == std::string::npos);
  const json j = json::parse(text);
  CHECK(j["v"] == 1);
  CHECK(j["node"] == "h1-42-1000");
  CHECK(j["host"] == "h1");
  CHECK(j["pid"] == 42);
  CHECK(j["group_rank"] == 1);
  CHECK(j["round"] == 3);
  CHECK(j["phase"] == "running");
  CHECK(j["state"] == "HEALTHY");
  CHECK(j["attempt"] == 1);
  CHECK(j["restarts"] == 1);
  CHECK(j["max_restarts"] == 3);
  CHECK(j["step"] == 120);
  CHECK(j["progress_age_s"] == 0.5);
  CHECK(j["updated_ms"] == 1700000000000LL);
  CHECK(j["health"] == "disk: / is 99% full");
  REQUIRE(j["ranks"].size() == 2);
  CHECK(j["ranks"][0]["rank"] == 100);
  CHECK(j["ranks"][0]["pid"] == 5000);
  CHECK(j["ranks"][0]["state"] == "running");
  CHECK(j["ranks"][0]["heartbeat_age_s"] == 1.25);
  CHECK(j["ranks"][0].count("cause") == 0);
  CHECK(j["ranks"][1]["state"] == "failed");
  CHECK(j["ranks"][1]["cause"] == "oom-killed: the memory cgroup's limit");
  CHECK(j["straggler"] == true);
  CHECK(j["ranks"][0].count("straggler") == 0);  // not sampled
  CHECK(j["ranks"][1]["straggler"] == true);
  CHECK(j["ranks"][1]["running_share"] == 0.25);
  CHECK(j["ranks"][1]["step_s"] == 1.5);
  CHECK(j.count("ranks_left_out") == 0);
}

TEST_CASE("board record: unknown ages are null") {
  BoardFacts f = facts();
  f.step.reset();
  f.seconds_since_progress.reset();
  HealthSnapshot s = snapshot(1);
  s.workers[0].seconds_since_heartbeat.reset();
  const json j = json::parse(board_record(f, s, 16384));
  CHECK(j["step"].is_null());
  CHECK(j["progress_age_s"].is_null());
  CHECK(j["ranks"][0]["heartbeat_age_s"].is_null());
}

TEST_CASE("board record: a few hundred bytes for a node of 8 ranks") {
  CHECK(board_record(facts(), snapshot(8), 16384).size() < 1500);
}

TEST_CASE("board record: ranks beyond the bound are left out and counted") {
  const size_t limit = 4096;
  const std::string text = board_record(facts(), snapshot(1000), limit);
  CHECK(text.size() <= limit);
  const json j = json::parse(text);
  const size_t kept = j["ranks"].size();
  CHECK(kept > 10);
  CHECK(kept + j["ranks_left_out"].get<size_t>() == 1000);
  // The first ranks are the ones kept.
  CHECK(j["ranks"][0]["rank"] == 100);
  CHECK(j["node"] == "h1-42-1000");
}

TEST_CASE("board record: long words are cut, and UTF-8 is not split") {
  HealthSnapshot s = snapshot(1);
  s.workers[0].state = WorkerRunState::failed;
  s.workers[0].cause = "crashed";
  s.workers[0].cause_detail = std::string(400, 'x') + "\xc3\xa9";
  s.last_hang = HangHealth{std::string(kMaxBoardText - 4, 'y') + "\xc3\xa9\xc3\xa9\xc3\xa9", "", "", -1, ""};
  const json j = json::parse(board_record(facts(), s, 16384));  // throws on split UTF-8
  CHECK(j["ranks"][0]["cause"].get<std::string>().size() <= kMaxBoardText);
  CHECK(j["hang"].get<std::string>().size() <= kMaxBoardText);
  CHECK(j["hang"].get<std::string>().substr(j["hang"].get<std::string>().size() - 3) == "...");
}

TEST_CASE("board record: a node whose own words exceed a tiny bound keeps who it is") {
  BoardFacts f = facts();
  f.host = std::string(2000, 'h');
  const std::string text = board_record(f, snapshot(3), 512);
  CHECK(text.size() <= 512);
  const json j = json::parse(text);
  CHECK(j["node"] == "h1-42-1000");
  CHECK(j["ranks_left_out"] == 3);
}
