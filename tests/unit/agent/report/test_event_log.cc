#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "agent/config.h"
#include "agent/report/event_log.h"
#include "agent/forensics/failure.h"

using namespace cxxrun::agent;
using nlohmann::json;

namespace {

struct EventLogDir {
  std::filesystem::path path;
  EventLogDir() {
    char tmpl[] = "/tmp/cxxrun_events_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~EventLogDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

std::vector<std::string> read_lines(const std::filesystem::path& file) {
  std::ifstream in(file);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::vector<std::string> keys(const json& object) {
  std::vector<std::string> out;
  for (auto it = object.begin(); it != object.end(); ++it) out.push_back(it.key());
  return out;
}

Config test_config() {
  Config c;
  c.run_id = "job42";
  c.role = "trainer";
  c.entrypoint_name = "train.py";
  c.nproc_per_node = 2;
  c.rdzv.backend = cxxrun::rendezvous::Backend::c10d;
  return c;
}

// Node 1 of 3, two workers each: the round's placement, not the config's.
cxxrun::rendezvous::Assignment test_placement() {
  cxxrun::rendezvous::Assignment a;
  a.group_rank = 1;
  a.group_world_size = 3;
  a.base_rank = 2;
  a.world_size = 6;
  return a;
}

}  // namespace

TEST_CASE("event log: worker and agent events in torchelastic's shape") {
  EventLogDir dir;
  const auto file = dir.path / "events.jsonl";
  const auto error_file = dir.path / "error.json";
  std::ofstream(error_file) << R"({"message": {"message": "boom", "extraInfo": {"py_callstack": "tb"}}})";

  {
    EventLog log(file.string());
    REQUIRE(log.enabled());
    log.context() = event_context(test_config(), test_placement(), 1);
    log.worker_status(WorkerStatus::start, {0, 2, 4242});
    Failure f;
    f.local_rank = 1;
    f.rank = 3;
    f.pid = 4243;
    f.exit_code = 7;
    f.error_file = error_file.string();
    log.worker_failed(f);
    log.worker_status(WorkerStatus::terminated, {0, 2, 4242});
    EventDetails took;
    took.duration_ms = 12.5;
    log.agent_event(AgentEvent::rendezvous, took);
    EventDetails restart;
    restart.extra["reason"] = std::string("worker failed");
    restart.extra["attempt"] = 2;
    log.agent_event(AgentEvent::restart, restart);
  }

  const auto lines = read_lines(file);
  REQUIRE(lines.size() == 5);
  std::vector<json> events;
  for (const auto& line : lines) events.push_back(json::parse(line));

  const std::vector<std::string> top = {"metadata", "name", "source", "timestamp"};
  const std::vector<std::string> meta_keys = {"agent_restarts", "duration_ms", "global_rank", "group_rank",
                                              "hostname",       "metadata",    "raw_error",   "rdzv_backend",
                                              "role",           "run_id",      "state",       "total_run_time",
                                              "worker_id"};
  for (const json& e : events) {
    CHECK(keys(e) == top);  // nlohmann::json sorts keys
    CHECK(keys(e["metadata"]) == meta_keys);
    CHECK(e["timestamp"].is_number_integer());
    CHECK(e["timestamp"].get<long long>() > 1600000000000LL);
    CHECK(e["metadata"]["run_id"] == "job42");
    CHECK(e["metadata"]["role"] == "trainer");
    CHECK(e["metadata"]["group_rank"] == 1);
    CHECK(e["metadata"]["rdzv_backend"] == "c10d");
    CHECK(e["metadata"]["agent_restarts"] == 1);
    CHECK(e["metadata"]["total_run_time"].is_number_integer());
    CHECK(!e["metadata"]["hostname"].get<std::string>().empty());
    CHECK(json::parse(e["metadata"]["metadata"].get<std::string>())["entry_point"] == "train.py");
    CHECK(json::parse(e["metadata"]["metadata"].get<std::string>())["group_world_size"] == 3);
  }

  const json& start = events[0];
  CHECK(start["name"] == "torchelastic.worker.status.START");
  CHECK(start["source"] == "WORKER");
  CHECK(start["metadata"]["state"] == "START");
  CHECK(start["metadata"]["global_rank"] == 2);
  CHECK(start["metadata"]["worker_id"] == "4242");
  CHECK(start["metadata"]["raw_error"].is_null());
  CHECK(start["metadata"]["duration_ms"].is_null());
  const json start_md = json::parse(start["metadata"]["metadata"].get<std::string>());
  CHECK(start_md["local_rank"] == 0);
  CHECK(start_md["role_rank"] == 2);
  CHECK(start_md["role_world_size"] == 6);

  const json& failed = events[1];
  CHECK(failed["name"] == "torchelastic.worker.status.FAILED");
  CHECK(failed["metadata"]["state"] == "FAILED");
  CHECK(failed["metadata"]["global_rank"] == 3);
  const json raw = json::parse(failed["metadata"]["raw_error"].get<std::string>());
  CHECK(raw["message"]["message"] == "boom");
  CHECK(json::parse(failed["metadata"]["metadata"].get<std::string>())["exit_code"] == 7);

  CHECK(events[2]["name"] == "torchelastic.worker.status.TERMINATED");

  const json& rdzv = events[3];
  CHECK(rdzv["name"] == "torchelastic.worker.status.RENDEZVOUS");
  CHECK(rdzv["source"] == "AGENT");
  CHECK(rdzv["metadata"]["state"] == "RENDEZVOUS");
  CHECK(rdzv["metadata"]["global_rank"].is_null());
  CHECK(rdzv["metadata"]["worker_id"].is_null());
  CHECK(rdzv["metadata"]["duration_ms"] == 12.5);
  CHECK(!json::parse(rdzv["metadata"]["metadata"].get<std::string>()).contains("local_rank"));

  const json& restart = events[4];
  CHECK(restart["name"] == "cxxrun.agent.RESTART");
  CHECK(restart["metadata"]["state"] == "RESTART");
  const json restart_md = json::parse(restart["metadata"]["metadata"].get<std::string>());
  CHECK(restart_md["reason"] == "worker failed");
  CHECK(restart_md["attempt"] == 2);
}

TEST_CASE("event log: keys keep torch's order on the line") {
  EventLogDir dir;
  const auto file = dir.path / "events.jsonl";
  {
    EventLog log(file.string());
    log.agent_event(AgentEvent::succeeded);
  }
  const auto lines = read_lines(file);
  REQUIRE(lines.size() == 1);
  const std::string& line = lines[0];
  CHECK(line.find("{\"name\":\"torchelastic.worker.status.SUCCEEDED\",\"source\":\"AGENT\",\"timestamp\":") == 0);
  const char* order[] = {"\"run_id\"",         "\"global_rank\"", "\"group_rank\"", "\"worker_id\"",
                         "\"role\"",           "\"hostname\"",    "\"state\"",      "\"total_run_time\"",
                         "\"rdzv_backend\"",   "\"raw_error\"",   "\"metadata\"",   "\"agent_restarts\"",
                         "\"duration_ms\""};
  size_t at = line.find("\"metadata\":{");
  REQUIRE(at != std::string::npos);
  for (const char* key : order) {
    const size_t next = line.find(key, at);
    INFO(key);
    REQUIRE(next != std::string::npos);
    at = next;
  }
}

TEST_CASE("event log: a failure without an error file explains itself") {
  EventLogDir dir;
  const auto file = dir.path / "events.jsonl";
  {
    EventLog log(file.string());
    Failure f;
    f.local_rank = 0;
    f.rank = 0;
    f.pid = 99;
    f.signal = 9;
    f.error_file = (dir.path / "missing.json").string();
    log.worker_failed(f);
  }
  const auto lines = read_lines(file);
  REQUIRE(lines.size() == 1);
  const json e = json::parse(lines[0]);
  const json raw = json::parse(e["metadata"]["raw_error"].get<std::string>());
  CHECK(raw["message"].get<std::string>().find("SIGKILL") != std::string::npos);
  const json md = json::parse(e["metadata"]["metadata"].get<std::string>());
  CHECK(md["signal"] == "SIGKILL");
  CHECK(md["exit_code"] == 137);
}

TEST_CASE("event log: two writers on one file append whole lines") {
  EventLogDir dir;
  const auto file = dir.path / "shared.jsonl";
  constexpr int kEach = 400;
  // Lines of several KiB, so that torn writes would show.
  const std::string padding(6000, 'x');
  auto writer = [&](int id) {
    EventLog log(file.string());
    log.context().group_rank = id;
    for (int i = 0; i < kEach; ++i) {
      EventDetails d;
      d.extra["padding"] = padding;
      d.extra["seq"] = i;
      log.worker_status(WorkerStatus::start, {0, id, 100 + id}, d);
    }
  };
  std::thread a(writer, 0), b(writer, 1);
  a.join();
  b.join();

  const auto lines = read_lines(file);
  REQUIRE(lines.size() == 2 * kEach);
  int next_seq[2] = {0, 0};
  for (const auto& line : lines) {
    const json e = json::parse(line);  // throws, failing the test, on a torn line
    const int id = e["metadata"]["group_rank"];
    REQUIRE((id == 0 || id == 1));
    const json md = json::parse(e["metadata"]["metadata"].get<std::string>());
    CHECK(md["seq"] == next_seq[id]);
    CHECK(md["padding"].get<std::string>().size() == padding.size());
    ++next_seq[id];
  }
  CHECK(next_seq[0] == kEach);
  CHECK(next_seq[1] == kEach);
}

TEST_CASE("event log: an existing file is appended to, not truncated") {
  EventLogDir dir;
  const auto file = dir.path / "events.jsonl";
  std::ofstream(file) << "{\"earlier\": true}\n";
  {
    EventLog log(file.string());
    log.agent_event(AgentEvent::failed, {std::nullopt, std::string("received SIGTERM"), {}});
  }
  const auto lines = read_lines(file);
  REQUIRE(lines.size() == 2);
  CHECK(json::parse(lines[0])["earlier"] == true);
  CHECK(json::parse(lines[1])["metadata"]["raw_error"] == "received SIGTERM");
}

TEST_CASE("event log: disabled with an empty path") {
  EventLog log("");
  CHECK_FALSE(log.enabled());
  log.worker_status(WorkerStatus::start, {0, 0, 1});
  log.worker_failed(Failure{});
  log.agent_event(AgentEvent::rendezvous);
}

TEST_CASE("event log: an unopenable path throws naming it; a FIFO without reader does not hang") {
  EventLogDir dir;
  const std::string bad = (dir.path / "no" / "such" / "dir.jsonl").string();
  try {
    EventLog log(bad);
    FAIL("expected std::system_error");
  } catch (const std::system_error& e) {
    CHECK(std::string(e.what()).find(bad) != std::string::npos);
  }
  const std::string fifo = (dir.path / "fifo").string();
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_AS(EventLog(fifo), std::system_error);
}

TEST_CASE("event log: names are torchrun's where torchrun has one") {
  CHECK(event_name(WorkerStatus::succeeded) == "torchelastic.worker.status.SUCCEEDED");
  CHECK(event_name(WorkerStatus::unhealthy) == "torchelastic.worker.status.UNHEALTHY");
  CHECK(event_name(AgentEvent::assign_worker_ranks) == "torchelastic.worker.status.ASSIGN_WORKER_RANKS");
  CHECK(event_name(AgentEvent::failed) == "torchelastic.worker.status.FAILED");
  CHECK(event_name(AgentEvent::phase) == "cxxrun.agent.PHASE");  // the timeline reads these (docs/restarts.md)
  CHECK(event_name(AgentEvent::goodput) == "cxxrun.agent.GOODPUT");
  CHECK(event_name(AgentEvent::straggler) == "cxxrun.agent.STRAGGLER");
  Config local;
  const cxxrun::rendezvous::Assignment one_node;
  CHECK(event_context(local, one_node).rdzv_backend == "static");
  Config standalone;
  standalone.rdzv.name = "c10d";
  CHECK(event_context(standalone, one_node).rdzv_backend == "c10d");
  CHECK(event_context(local, one_node).world_size == 1);
}

TEST_CASE("event log: a link another user planted at the path is not followed") {
  if (geteuid() != 0) {
    WARN("skipped: needs root, to make a link of another user's");
    return;
  }
  EventLogDir dir;
  const auto target = dir.path / "target";
  std::ofstream(target) << "";
  const auto link = dir.path / "events.jsonl";
  std::filesystem::create_symlink(target, link);
  REQUIRE(lchown(link.c_str(), 12345, 12345) == 0);
  try {
    EventLog log(link.string());
    FAIL("expected std::system_error");
  } catch (const std::system_error& e) {
    CHECK(std::string(e.what()).find("uid 12345") != std::string::npos);
  }
  CHECK(std::filesystem::file_size(target) == 0);
  // This user's own link is the user's choice: followed.
  REQUIRE(lchown(link.c_str(), 0, 0) == 0);
  {
    EventLog log(link.string());
    log.agent_event(AgentEvent::failed, {std::nullopt, std::string("received SIGTERM"), {}});
  }
  CHECK(std::filesystem::file_size(target) > 0);
}
