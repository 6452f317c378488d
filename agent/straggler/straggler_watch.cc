#include "agent/straggler/straggler_watch.h"

#include <cstdlib>

#include <fmt/format.h>
#include <spdlog/logger.h>

#include "agent/hang/watchdog.h"
#include "agent/hostname.h"
#include "agent/progress/progress_pattern.h"
#include "agent/straggler/rank_gpus.h"
#include "agent/workers/workers.h"

namespace cxxrun::agent {
namespace {

constexpr std::chrono::milliseconds kTick{100};
// A node whose summary stayed the same for this many of group rank 0's
// reads stopped publishing (its workers stopped, the agent is gone): it is
// left out.
constexpr int kStaleReads = 2;

std::optional<std::string> agent_cuda_visible_devices() {
  const char* v = std::getenv("CUDA_VISIBLE_DEVICES");
  return v ? std::optional<std::string>(v) : std::nullopt;
}

StragglerNews news_of(const StragglerVerdict& v, const std::string& line) {
  StragglerNews n;
  n.named = v.named;
  n.signal = std::string(signal_name(v.signal));
  n.ratio = v.ratio;
  n.cause = v.causes.empty() ? "none" : std::string(cause_name(v.causes.front().kind));
  n.line = line;
  return n;
}

}  // namespace

StragglerWatch::StragglerWatch(boost::asio::io_context& io, const Config& config, const Workers& group,
                               const HangWatchdog& watchdog, const OpenGpus& gpus, Link link, Hooks hooks)
    : io_(io), c_(config), group_(group), watchdog_(watchdog), link_(std::move(link)), hooks_(std::move(hooks)),
      timer_(io), host_(this_hostname()) {
  if (c_.straggler_action == StragglerAction::off) return;
  sampler_ = std::make_unique<SpeedSampler>(kStragglerWindow, gpus ? gpus() : nullptr,
                                            RankGpus::from(c_, agent_cuda_visible_devices()));
  if (!c_.progress_pattern.empty()) pattern_ = std::make_unique<ProgressPattern>(c_.progress_pattern);
  tick();
}

StragglerWatch::~StragglerWatch() = default;

void StragglerWatch::attempt_started(const rendezvous::Assignment& placement) {
  placement_ = placement;
  ++attempt_;
  windows_ = 0;
  seq_ = 0;
  steps_.reset();
  ranks_.reset();
  nodes_.reset();
  seen_.clear();
  named_nodes_.clear();
  said_.clear();
  node_line_.clear();
  rank_lines_.clear();
  replacing_ = false;
  told_no_spare_ = false;
  view_ = {};
  targets_.clear();
  if (sampler_) sampler_->set_targets({});
}

void StragglerWatch::line(int local_rank, std::string_view text) {
  if (!pattern_ || !sampler_) return;
  if (auto m = pattern_->match(text)) steps_.step(local_rank, m->step, std::chrono::steady_clock::now());
}

void StragglerWatch::tick() {
  timer_.expires_after(kTick);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec) return;
    tick();
  });
  if (!hooks_.running()) return;
  targets();
  const auto now = std::chrono::steady_clock::now();
  for (const SpeedSampler::Target& t : targets_)
    if (auto step = watchdog_.step_of(t.local_rank)) steps_.step(t.local_rank, *step, now);
  if (auto w = sampler_->tick(now)) on_window(*w, now);
}

void StragglerWatch::targets() {
  std::vector<SpeedSampler::Target> now;
  for (const auto& w : group_.workers())
    if (w->running && w->pid > 0) now.push_back({w->rank, w->local_rank, w->pid});
  const bool same = std::equal(now.begin(), now.end(), targets_.begin(), targets_.end(), [](const auto& a, const auto& b) {
    return a.rank == b.rank && a.local_rank == b.local_rank && a.pid == b.pid;
  });
  if (same) return;
  targets_ = now;
  sampler_->set_targets(std::move(now));
}

void StragglerWatch::on_window(const SpeedSampler::Window& w, std::chrono::steady_clock::time_point now) {
  ++windows_;
  const auto step_times = steps_.window(now, kStragglerWindow);
  std::vector<PeerWindow> peers;
  view_.ranks.clear();
  for (const RankWindow& r : w.ranks) {
    const auto step = step_times.find(r.local_rank);
    peers.push_back(rank_peer(r, step == step_times.end() ? std::nullopt : std::optional<double>(step->second), w.host));
    view_.ranks.push_back({r.local_rank, r.rank, r.running_share, peers.back().step_seconds, false});
  }
  // The first window is the program's start (imports, the store, the
  // first collective): not compared.
  if (windows_ > 1) {
    const double seconds = w.host.seconds > 0 ? w.host.seconds : std::chrono::duration<double>(kStragglerWindow).count();
    on_ranks(ranks_.window(peers, seconds));
  }
  for (RankSpeed& r : view_.ranks) r.straggler = ranks_.named(r.rank);
  hooks_.view(view_);
  if (windows_ > 1 && !peers.empty() && placement_.group_world_size > 1)
    share(node_peer(peers), static_cast<int>(w.ranks.size()));
  if (!node_line_.empty())
    replace(node_line_);
  else if (!rank_lines_.empty())
    replace(rank_lines_.begin()->second);
}

void StragglerWatch::on_ranks(const std::vector<StragglerVerdict>& verdicts) {
  for (const StragglerVerdict& v : verdicts) {
    const std::string who = fmt::format("rank {} on {}", v.id, host_);
    std::string line;
    if (v.named) {
      line = fmt::format("straggler: {} {}; {}", who, describe_slowness(v, "rank"),
                         describe_causes(v.causes));
      group_.log()->warn("{}", line);
      if (!v.causes.empty()) rank_lines_[v.id] = line;
    } else {
      line = fmt::format("straggler: {} is no longer slower than the other ranks of its node", who);
      group_.log()->info("{}", line);
      rank_lines_.erase(v.id);
    }
    StragglerNews n = news_of(v, line);
    n.rank = v.id;
    n.group_rank = placement_.group_rank;
    n.host = host_;
    hooks_.news(n);
  }
}

void StragglerWatch::share(const PeerWindow& node, int ranks) {
  NodeSummary s;
  s.seq = ++seq_;
  s.host = host_;
  s.first_rank = placement_.base_rank;
  s.ranks = ranks;
  s.window = node;
  const bool leader = placement_.group_rank == 0;
  // The call runs on the link's thread: it holds only copies.
  link_([this, line = encode(s), leader, attempt = attempt_](rendezvous::Rendezvous& r) -> Then {
    std::string said = r.exchange_speed(line);
    std::vector<std::string> all;
    if (leader) all = r.node_speeds();
    return [this, attempt, said = std::move(said), all = std::move(all)] {
      if (attempt != attempt_) return;
      on_said(said);
      if (!all.empty()) on_nodes(all);
    };
  });
}

void StragglerWatch::on_said(const std::string& said) {
  if (said == said_) return;
  said_ = said;
  const auto v = decode_verdict(said);
  view_.node_straggler = v.has_value();
  hooks_.view(view_);
  node_line_ = v && v->host_cause ? v->line : "";
  if (!v) return;
  // Group rank 0 said it when it named this node.
  if (placement_.group_rank != 0) group_.log()->warn("{}", v->line);
}

void StragglerWatch::on_nodes(const std::vector<std::string>& summaries) {
  std::vector<PeerWindow> peers;
  std::map<int, NodeSummary> by_rank;
  for (int g = 0; g < static_cast<int>(summaries.size()); ++g) {
    auto s = decode(summaries[g], g);
    if (!s) continue;
    auto& [seq, stale] = seen_[g];
    stale = s->seq == seq ? stale + 1 : 0;
    seq = s->seq;
    if (stale >= kStaleReads) continue;
    peers.push_back(s->window);
    by_rank[g] = std::move(*s);
  }
  if (peers.size() < 2) return;
  for (const StragglerVerdict& v : nodes_.window(peers, std::chrono::duration<double>(kStragglerWindow).count())) {
    const NodeSummary& s = v.named ? by_rank[v.id] : named_nodes_[v.id];
    std::string line;
    if (v.named) {
      line = fmt::format("straggler: {} {}; {}", subject(s), describe_slowness(v, "node"),
                         describe_causes(v.causes));
      group_.log()->warn("{}", line);
      named_nodes_[v.id] = s;
    } else {
      line = fmt::format("straggler: {} is no longer slower than the other nodes", subject(s));
      group_.log()->info("{}", line);
    }
    link_([g = v.id, said = v.named ? encode(NodeVerdict{line, !v.causes.empty()}) : std::string()](
              rendezvous::Rendezvous& r) -> Then {
      r.tell_node(g, said);
      return {};
    });
    StragglerNews n = news_of(v, line);
    n.node = true;
    n.rank = s.first_rank;
    n.ranks = s.ranks;
    n.group_rank = v.id;
    n.host = s.host;
    hooks_.news(n);
    if (!v.named) named_nodes_.erase(v.id);
  }
}

std::string StragglerWatch::subject(const NodeSummary& s) const {
  const int g = s.window.id;
  if (s.ranks == 1) return fmt::format("rank {} on {} (node rank {})", s.first_rank, s.host, g);
  return fmt::format("node {} (node rank {}, ranks {}-{})", s.host, g, s.first_rank, s.first_rank + s.ranks - 1);
}

void StragglerWatch::replace(const std::string& line) {
  if (c_.straggler_action != StragglerAction::replace || replacing_) return;
  replacing_ = true;
  // Said before the round can end: the gate must know why when it comes.
  hooks_.step_out(line);
  link_([this, attempt = attempt_](rendezvous::Rendezvous& r) -> Then {
    const bool called = r.call_spare();
    return [this, attempt, called] {
      if (attempt != attempt_) return;
      if (called) {
        group_.log()->warn("straggler: this node steps out for the spare waiting to join (--straggler-action=replace)");
        return;
      }
      hooks_.step_out("");
      replacing_ = false;
      if (told_no_spare_) return;
      told_no_spare_ = true;
      group_.log()->warn("straggler: no spare waits to take this node's place; it only reports "
                         "(--straggler-action=replace)");
    };
  });
}

}  // namespace cxxrun::agent
