// Straggler detection on the supervisor's loop (docs/stragglers.md): a
// 100 ms timer of its own samples the workers (agent/straggler/signals.h),
// counts their steps (agent/straggler/step_clock.h) and, every window,
//   - judges this node's ranks against each other (agent/straggler/detector.h)
//     and says one line for each rank named or cleared;
//   - stores the node's summary through the rendezvous (node_summary.h,
//     Rendezvous::exchange_speed) and learns whether the job names this
//     node; on group rank 0, reads every node's summary, judges the nodes
//     and tells each one it names (Rendezvous::node_speeds, tell_node);
//   - with --straggler-action=replace, a slow node with a host cause steps
//     out for a waiting spare: the round ends with `join`
//     (Rendezvous::call_spare) and the node leaves at the next round
//     through the node-health path (agent/round_gate.h), never when no
//     spare waits.
// Every rendezvous call runs on the link's thread (agent/rendezvous_link.h);
// nothing here blocks but small /proc reads. Off with
// --straggler-action=off: no timer, no sampling.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/config.h"
#include "agent/straggler/detector.h"
#include "agent/straggler/gpu_clocks.h"
#include "agent/straggler/node_summary.h"
#include "agent/straggler/signals.h"
#include "agent/straggler/step_clock.h"
#include "agent/straggler/straggler_news.h"
#include "rendezvous/rendezvous.h"

namespace cxxrun::agent {

class HangWatchdog;
class ProgressPattern;
class Workers;

// How long one window lasts: named after kNameAfter slow ones (15 s at the least), and
// the cause read over the last kCauseWindows (30 s).
inline constexpr std::chrono::seconds kStragglerWindow{5};

class StragglerWatch {
 public:
  // What the watch tells its owner, on the loop.
  struct Hooks {
    std::function<bool()> running;                   // the group runs: sample only then
    std::function<void(const StragglerNews&)> news;  // named or cleared (the line is logged)
    std::function<void(const SpeedView&)> view;      // every window
    // --straggler-action=replace: this node leaves at the next round, for
    // `why` ("": it stays after all, no spare waited).
    std::function<void(const std::string& why)> step_out;
  };
  // Runs `call` on the rendezvous link's thread, its continuation on the loop.
  using Then = std::function<void()>;
  using Link = std::function<void(std::function<Then(rendezvous::Rendezvous&)>)>;
  // NVML's clocks (agent/health/nvml_clocks.h), opened only when sampling is
  // on; nullptr: none.
  using OpenGpus = std::function<std::shared_ptr<GpuClocks>()>;

  StragglerWatch(boost::asio::io_context& io, const Config& config, const Workers& group,
                 const HangWatchdog& watchdog, const OpenGpus& gpus, Link link, Hooks hooks);
  ~StragglerWatch();
  StragglerWatch(const StragglerWatch&) = delete;
  StragglerWatch& operator=(const StragglerWatch&) = delete;

  // A new attempt in `placement`: nothing of the last one is compared.
  void attempt_started(const rendezvous::Assignment& placement);
  // A worker's output line (the supervisor observes lines only with
  // --progress-pattern): a match is a step of that rank.
  void line(int local_rank, std::string_view text);

 private:
  void tick();
  void targets();
  void on_window(const SpeedSampler::Window& w, std::chrono::steady_clock::time_point now);
  void on_ranks(const std::vector<StragglerVerdict>& verdicts);
  void share(const PeerWindow& node, int ranks);
  void on_said(const std::string& said);
  void on_nodes(const std::vector<std::string>& summaries);
  // --straggler-action=replace, while this node or one of its ranks is
  // named with a host cause: calls a waiting spare in, once at a time.
  void replace(const std::string& line);
  std::string subject(const NodeSummary& node) const;

  boost::asio::io_context& io_;
  const Config& c_;
  const Workers& group_;
  const HangWatchdog& watchdog_;
  Link link_;
  Hooks hooks_;
  std::unique_ptr<SpeedSampler> sampler_;
  std::unique_ptr<ProgressPattern> pattern_;
  boost::asio::steady_timer timer_;
  const std::string host_;
  rendezvous::Assignment placement_;
  StepClock steps_;
  PeerJudge ranks_{false};
  PeerJudge nodes_{true};
  std::vector<SpeedSampler::Target> targets_;
  int windows_ = 0;   // this attempt's, the first (startup) not judged
  uint32_t seq_ = 0;  // summaries published in this attempt
  std::map<int, std::pair<uint32_t, int>> seen_;  // group rank 0: each node's last seq, reads it stayed
  std::map<int, NodeSummary> named_nodes_;        // group rank 0: the nodes it named
  std::string said_;         // what group rank 0 says of this node
  std::string node_line_;    // its line, when it names this node with a host cause
  std::map<int, std::string> rank_lines_;  // this node's ranks named with a host cause
  bool replacing_ = false;   // a call for a spare is in flight, or made
  bool told_no_spare_ = false;
  SpeedView view_;
  int attempt_ = 0;
};

}  // namespace cxxrun::agent
