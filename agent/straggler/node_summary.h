// What one node tells the job of its last window, and what the job tells a
// node it names: the bytes of straggler detection across nodes. Each node
// stores one line under a key of its own every window
// (Rendezvous::exchange_speed), a few dozen bytes, so that group rank 0
// reads the whole job's in one request (Rendezvous::node_speeds): at 10,000
// nodes well under a megabyte a window (bench/RESULTS.md, "Stragglers").
// Pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/straggler/detector.h"
#include "agent/straggler/signals.h"

namespace cxxrun::agent {

// The longest line encode() makes (a host name is cut at 64 bytes, the GPU's
// throttle reasons at 32).
inline constexpr std::size_t kMaxSummaryBytes = 200;

struct NodeSummary {
  uint32_t seq = 0;    // windows this node published in the round: a stale one stays put
  std::string host;
  int first_rank = 0;  // its global ranks: first_rank .. first_rank + ranks - 1
  int ranks = 0;
  PeerWindow window;   // the node as one peer (node_window); its id is the group rank
};

// One rank's window as a peer: the sampler's reading and its step time.
PeerWindow rank_peer(const RankWindow& r, std::optional<double> step_seconds, const HostWindow& host);
// The node as one peer among nodes: its median rank's computing and waiting
// shares and step time (a node is slow when its ranks are, not one of them:
// that is the node's own judge's), its slowest GPU, its most throttled
// cgroup, its median CPU wait, the host's steal and pressure.
PeerWindow node_peer(const std::vector<PeerWindow>& ranks);

// "1|seq|host|first|n|running|blocked|step|throttled|clock|gpu reasons|wait|steal|psi cpu|memory|io", one
// line, a field empty when unknown.
std::string encode(const NodeSummary& s);
// nullopt for a line encode() did not make (another version, garbage).
std::optional<NodeSummary> decode(std::string_view line, int group_rank);

// What group rank 0 tells a node it names: the line to log, and whether a
// host cause was found (--straggler-action=replace acts only then: a node
// slow by its own work would be slow anywhere).
struct NodeVerdict {
  std::string line;
  bool host_cause = false;
};
std::string encode(const NodeVerdict& v);
std::optional<NodeVerdict> decode_verdict(std::string_view text);

}  // namespace cxxrun::agent
