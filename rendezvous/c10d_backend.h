// The c10d backend: the rendezvous algorithm of c10d_rendezvous.h over the
// job's state store (a TCPStore, job_store.h, or etcd, etcd_job_store.h), with everything elastic around it: a watcher
// woken by the store when the round ends, keep-alives on a connection of
// their own with a short deadline (so a lost store shows within
// keep_alive_max_attempt beats), and the workers' store served by group
// rank 0's agent.
#pragma once

#include <functional>
#include <memory>

#include "rendezvous/c10d_rendezvous.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/request_watcher.h"
#include "rendezvous/round_watcher.h"
#include "rendezvous/speed_board.h"
#include "rendezvous/state_store.h"
#include "rendezvous/worker_store.h"

namespace cxxrun::rendezvous {

class C10dBackend : public Rendezvous {
 public:
  // `open` connects to the job's state store as `config` says (hosting it
  // if need be) when the node joins; a node that declines opens it as a
  // client only, with short deadlines.
  using OpenStore = std::function<std::unique_ptr<StateStore>(const RendezvousConfig& config)>;
  C10dBackend(const RendezvousConfig& config, const WorkerStorePlan& workers, OpenStore open);
  ~C10dBackend() override;

  Assignment join() override;
  Assignment rejoin() override;
  void renew_worker_store() override { workers_.renew(); }
  bool elastic() const override { return true; }
  bool survives_store_outage() const override { return store_ && store_->replicated(); }
  std::chrono::milliseconds keep_alive_interval() const override { return config_.settings.keep_alive_interval; }
  bool keep_alive() override;
  Liveness check_members() override;
  void watch(OnEvent on_event) override;
  void publish_failure(const std::string& record) override;
  RoundEvent finish_round() override;
  std::vector<std::string> failure_records(std::chrono::milliseconds limit) override;
  std::vector<std::string> published_failures() override;
  std::vector<std::string> attempt_records(const std::string& mine, std::chrono::milliseconds limit) override;
  std::string settle_verdict(const Proposal& propose) override;
  void leave(bool succeeded) override;
  std::string exchange_speed(const std::string& summary) override;
  std::vector<std::string> node_speeds() override;
  void tell_node(int group_rank, const std::string& verdict) override;
  bool call_spare() override;
  void step_out() override;
  void decline(const std::string& why) override;
  void inject(const StoreFault& fault) override;
  std::optional<board::StopRequest> publish_board(const std::string& node, const std::string& record) override;
  void watch_requests(OnRequest on_request) override;
  void abandon() override;
  void answer_request(long long n, const std::string& node, const std::string& answer) override;

 private:
  Assignment joined(const Assignment& a);
  // No beat got through for keep_alive_interval * keep_alive_max_attempt.
  bool store_lost() const;
  // A coordination call failed for want of the store. With a replicated
  // store, the steps after it fail at once instead of waiting out their own
  // deadlines: one read_timeout bounds the whole failure.
  void coordination_failed(const char* what, const std::exception& e);

  const RendezvousConfig config_;
  const WorkerStorePlan plan_;
  WorkerStore workers_;
  OpenStore open_;
  std::unique_ptr<StateStore> store_;
  std::unique_ptr<store::StoreClient> beats_;
  std::unique_ptr<C10dRendezvous> rdzv_;
  int beat_failures_ = 0;
  bool store_gone_ = false;  // see coordination_failed()
  std::chrono::steady_clock::time_point last_beat_ok_ = std::chrono::steady_clock::now();
  // Members found dead in this round: the next round expects them gone.
  int dead_seen_ = 0;
  StoreFault fault_;
  // The current round's straggler summaries, on a connection of their own
  // (kBoardTimeout).
  std::unique_ptr<SpeedBoard> speeds_;
  // The board's connection (kBoardTimeout), made at the first publish and
  // again after a failed one; whether this node's id is in the index yet.
  std::unique_ptr<store::StoreClient> board_;
  bool board_indexed_ = false;
  // Last: destroyed first, so they never deliver from a half-destroyed object.
  std::unique_ptr<RoundWatcher> watcher_;
  std::unique_ptr<RequestWatcher> requests_;
};

}  // namespace cxxrun::rendezvous
