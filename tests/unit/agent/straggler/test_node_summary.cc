// What one node tells the job of its window (agent/straggler/node_summary.h):
// the node as one peer, its line and its size, read back.
#include <catch2/catch.hpp>

#include "agent/straggler/node_summary.h"

using namespace cxxrun::agent;

TEST_CASE("a node as one peer: its median rank, slowest GPU, most throttled cgroup", "[straggler]") {
  std::vector<PeerWindow> ranks(4);
  const double running[] = {0.2, 0.3, 0.25, 0.95};
  for (int r = 0; r < 4; ++r) {
    ranks[r].id = r;
    ranks[r].running = running[r];
    ranks[r].blocked = 1 - running[r];
    ranks[r].gpu_clock = r == 1 ? 0.5 : 1.0;
    ranks[r].step_seconds = 1.0 + r;
  }
  ranks[1].gpu_throttle = "thermal";
  ranks[3].throttled = 0.4;
  ranks[3].cgroup = "/x";
  const PeerWindow n = node_peer(ranks);
  CHECK(n.running == Approx(0.275));  // one slow rank does not make a slow node
  CHECK(*n.step_seconds == Approx(2.5));
  CHECK(*n.gpu_clock == Approx(0.5));
  CHECK(n.gpu_throttle == "thermal");
  CHECK(*n.throttled == Approx(0.4));
}

TEST_CASE("a summary is one short line, read back; garbage is not a summary", "[straggler]") {
  NodeSummary s;
  s.seq = 17;
  s.host = "gpu-node-0042.cluster.example.com";
  s.first_rank = 9992;
  s.ranks = 8;
  s.window.running = 0.9512;
  s.window.blocked = 0.02;
  s.window.throttled = 0.48;
  s.window.gpu_clock = 0.45;
  s.window.gpu_throttle = "thermal, power cap";
  s.window.steal = 0.0;
  const std::string line = encode(s);
  CHECK(line == "1|17|gpu-node-0042.cluster.example.com|9992|8|0.951|0.02||0.48|0.45|thermal, power cap|0|0|||");
  CHECK(line.size() < 100);
  const auto back = decode(line, 5);
  REQUIRE(back);
  CHECK(back->window.id == 5);
  CHECK(back->seq == 17);
  CHECK(back->host == s.host);
  CHECK(back->first_rank == 9992);
  CHECK(back->window.running == Approx(0.951));
  CHECK_FALSE(back->window.step_seconds);
  CHECK(*back->window.gpu_clock == Approx(0.45));
  CHECK(back->window.gpu_throttle == "thermal, power cap");
  CHECK_FALSE(back->window.psi_io);
  s.host = std::string(300, 'h') + "|x";
  CHECK(encode(s).size() <= kMaxSummaryBytes);
  CHECK_FALSE(decode("", 0));
  CHECK_FALSE(decode("2|17|h|0|1|0.5|0.5||||||||", 0));
  CHECK_FALSE(decode("1|x|h|0|1|0.5|0.5||||||||||", 0));

  const auto v = decode_verdict(encode(NodeVerdict{"straggler: node b", true}));
  REQUIRE(v);
  CHECK(v->line == "straggler: node b");
  CHECK(v->host_cause);
  CHECK_FALSE(decode_verdict("nothing"));
}
