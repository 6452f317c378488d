// A HealthSnapshot with something in every field the reports always show (a
// running and a failed worker, restarts, failures by cause), for the tests of
// /healthz and /metrics: the text (test_health_report.cc) and the server
// (test_health_server.cc).
#pragma once

#include "agent/report/health_snapshot.h"

inline cxxrun::agent::HealthSnapshot sample_snapshot() {
  using namespace cxxrun::agent;
  HealthSnapshot s;
  s.state = GroupState::healthy;
  s.run_id = "job42";
  s.role = "trainer";
  s.group_rank = 1;
  s.group_world_size = 2;
  s.restart_count = 2;
  s.max_restarts = 3;
  s.workers = {{0, 4, 1000, WorkerRunState::running, 1.5, "", ""},
               {1, 5, 1001, WorkerRunState::failed, std::nullopt, "oom-killed",
                "oom-killed: the kernel's OOM killer killed pid 1001"}};
  s.failures_by_cause = {{"oom-killed", 1}, {"crashed", 0}};
  return s;
}
