// The health report's texts (agent/report/health_report.h): /healthz's JSON
// and /metrics' Prometheus text for a snapshot, without a server. The
// server's own behaviour is test_health_server.cc's.
#include <catch2/catch.hpp>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "agent/report/health_report.h"
#include "health_snapshot_sample.h"

using namespace cxxrun::agent;
using nlohmann::json;

TEST_CASE("health report: infinities and NaN use Prometheus spellings; JSON shows null") {
  HealthSnapshot s = sample_snapshot();
  s.workers[0].seconds_since_heartbeat = std::numeric_limits<double>::infinity();
  CHECK(prometheus_text(s).find("cxxrun_worker_seconds_since_heartbeat{local_rank=\"0\",rank=\"4\"} +Inf\n") !=
        std::string::npos);
  CHECK(json::parse(health_json(s))["workers"][0]["seconds_since_heartbeat"].is_null());
}

TEST_CASE("health report: an unreachable rendezvous store while the workers go on") {
  HealthSnapshot s = sample_snapshot();
  json body = json::parse(health_json(s));
  CHECK(body["rendezvous_reachable"] == true);
  CHECK(body["rendezvous_unreachable_seconds"].is_null());
  CHECK(prometheus_text(s).find("\ncxxrun_rendezvous_reachable 1\n") != std::string::npos);
  s.rendezvous_unreachable_seconds = 4.5;
  body = json::parse(health_json(s));
  CHECK(body["rendezvous_reachable"] == false);
  CHECK(body["rendezvous_unreachable_seconds"] == 4.5);
  CHECK(body["state"] == "HEALTHY");  // the workers are
  CHECK(prometheus_text(s).find("\ncxxrun_rendezvous_reachable 0\n") != std::string::npos);
}

TEST_CASE("health report: each health check's last verdict, in /healthz and /metrics") {
  HealthSnapshot s = sample_snapshot();
  CHECK(json::parse(health_json(s))["checks"].empty());
  CHECK(prometheus_text(s).find("cxxrun_health_check_ok{") == std::string::npos);
  s.checks = {{"gpu", true, "4 GPUs answer", 0.012}, {"path /scratch", false, "/scratch has 1.0 GiB free", 0.5}};
  const json checks = json::parse(health_json(s))["checks"];
  REQUIRE(checks.size() == 2);
  CHECK(checks[1]["name"] == "path /scratch");
  CHECK(checks[1]["healthy"] == false);
  CHECK(checks[1]["detail"] == "/scratch has 1.0 GiB free");
  CHECK(checks[0]["seconds"] == 0.012);
  const std::string metrics = prometheus_text(s);
  CHECK(metrics.find("cxxrun_health_check_ok{check=\"gpu\"} 1\n") != std::string::npos);
  CHECK(metrics.find("cxxrun_health_check_ok{check=\"path /scratch\"} 0\n") != std::string::npos);
  CHECK(metrics.find("cxxrun_health_check_seconds{check=\"path /scratch\"} 0.5\n") != std::string::npos);
}

TEST_CASE("health report: seconds per goodput phase and the ratio in /metrics") {
  HealthSnapshot s = sample_snapshot();
  CHECK(prometheus_text(s).find("cxxrun_phase_seconds{") == std::string::npos);  // none given
  CHECK(prometheus_text(s).find("\ncxxrun_goodput_ratio ") == std::string::npos);
  s.phase_seconds = {{"rendezvous", 0.5}, {"startup", 2}, {"productive", 7.5}, {"lost", 0}};
  s.goodput_ratio = 0.75;
  const std::string metrics = prometheus_text(s);
  CHECK(metrics.find("# TYPE cxxrun_phase_seconds gauge\n") != std::string::npos);
  CHECK(metrics.find("cxxrun_phase_seconds{phase=\"rendezvous\"} 0.5\n") != std::string::npos);
  CHECK(metrics.find("cxxrun_phase_seconds{phase=\"productive\"} 7.5\n") != std::string::npos);
  CHECK(metrics.find("cxxrun_phase_seconds{phase=\"lost\"} 0\n") != std::string::npos);
  CHECK(metrics.find("# TYPE cxxrun_goodput_ratio gauge\ncxxrun_goodput_ratio 0.75\n") != std::string::npos);
}

TEST_CASE("health report: each rank's straggler window and the node's verdict in /metrics") {
  HealthSnapshot s = sample_snapshot();
  std::string metrics = prometheus_text(s);
  CHECK(metrics.find("cxxrun_rank_running_share{") == std::string::npos);  // nothing sampled
  CHECK(metrics.find("\ncxxrun_node_straggler 0\n") != std::string::npos);
  s.speeds.ranks = {{0, 4, 0.25, 1.5, false}, {1, 5, 0.95, std::nullopt, true}};
  s.speeds.node_straggler = true;
  metrics = prometheus_text(s);
  CHECK(metrics.find("# TYPE cxxrun_rank_straggler gauge\n") != std::string::npos);
  CHECK(metrics.find("cxxrun_rank_running_share{local_rank=\"1\",rank=\"5\"} 0.95\n") != std::string::npos);
  CHECK(metrics.find("cxxrun_rank_step_seconds{local_rank=\"0\",rank=\"4\"} 1.5\n") != std::string::npos);
  CHECK(metrics.find("cxxrun_rank_step_seconds{local_rank=\"1\"") == std::string::npos);  // no steps reported
  CHECK(metrics.find("cxxrun_rank_straggler{local_rank=\"0\",rank=\"4\"} 0\n") != std::string::npos);
  CHECK(metrics.find("cxxrun_rank_straggler{local_rank=\"1\",rank=\"5\"} 1\n") != std::string::npos);
  CHECK(metrics.find("\ncxxrun_node_straggler 1\n") != std::string::npos);
}
