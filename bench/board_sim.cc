// The job board of N simulated agents, for timing `cxxrunctl status`
// against it (bench/board.py drives both; bench/RESULTS.md "cxxrunctl
// status"): writes into a real store (cxxrun-rdzv) what N agents of
// --nproc ranks each publish, each record built by the agent's own
// board_record() from a snapshot of running ranks, through the board's own
// publish(), so the bytes a reader fetches are the agents' bytes.
//
//   board_sim --port P [--host 127.0.0.1] --nodes 10000 [--nproc 8] [--run-id sim]
//
// Prints one line of JSON: nodes, record bytes (mean), and the seconds the
// writes took.
#include <chrono>
#include <cstdio>
#include <string>

#include "agent/report/board_record.h"
#include "args.h"
#include "rendezvous/job_board.h"
#include "store/client.h"

using namespace cxxrun;

int main(int argc, char** argv) {
  std::string host = "127.0.0.1", run_id = "sim";
  int port = 0, nodes = 1000, nproc = 8;
  if (!bench_args::parse("board_sim", argc, argv,
                         {bench_args::arg("--host", host), bench_args::arg("--port", port),
                          bench_args::arg("--nodes", nodes), bench_args::arg("--nproc", nproc),
                          bench_args::arg("--run-id", run_id)}))
    return 2;
  if (port <= 0 || nodes <= 0 || nproc <= 0) {
    std::fprintf(stderr, "board_sim: --port, --nodes and --nproc must be positive\n");
    return 2;
  }
  store::StoreClient::Options o;
  o.host = host;
  o.port = port;
  o.timeout = std::chrono::seconds(30);
  auto client = store::StoreClient::connect(o);
  const auto began = std::chrono::steady_clock::now();
  const long long now_ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  size_t bytes = 0;
  for (int n = 0; n < nodes; ++n) {
    agent::HealthSnapshot s;
    s.state = agent::GroupState::healthy;
    s.group_rank = n;
    s.group_world_size = nodes;
    s.max_restarts = 3;
    for (int l = 0; l < nproc; ++l) {
      agent::WorkerHealth w;
      w.local_rank = l;
      w.rank = n * nproc + l;
      w.pid = 100000 + w.rank;
      w.seconds_since_heartbeat = 0.4;
      s.workers.push_back(w);
    }
    agent::BoardFacts f;
    f.host = "node" + std::to_string(n) + ".cluster.example";
    f.agent_pid = 4242;
    f.node = f.host + "-4242-" + std::to_string(now_ms);
    f.phase = "running";
    f.step = 1234;
    f.seconds_since_progress = 0.8;
    f.updated_ms = now_ms;
    const std::string record = agent::board_record(f, s, rendezvous::board::kMaxRecordBytes);
    bytes += record.size();
    rendezvous::board::publish(*client, run_id, f.node, record, true);
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  std::printf("{\"nodes\": %d, \"nproc\": %d, \"record_bytes\": %zu, \"write_s\": %.3f}\n", nodes, nproc,
              bytes / static_cast<size_t>(nodes), took);
  return 0;
}
