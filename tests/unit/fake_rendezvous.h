// A fake rendezvous for the agent's tests (the Rendezvous seam,
// rendezvous/rendezvous.h): no store, no peers; the test sets what each
// call answers.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/rendezvous.h"

namespace cxxrun::rendezvous {

// A rendezvous the test sets up: elastic or not, a store that answers or
// not (and how many beats it was sent), dead members, a rejoin that blocks
// until released. Called on the link's thread.
class FakeRendezvous final : public Rendezvous {
 public:
  explicit FakeRendezvous(bool elastic, std::chrono::milliseconds interval = std::chrono::milliseconds(40))
      : elastic_(elastic), interval_(interval) {}

  Assignment join() override { return {}; }
  Assignment rejoin() override {
    if (block_rejoin) {
      in_rejoin.set_value();
      released.wait();
    }
    if (closed_at_rejoin) throw RendezvousClosed("rendezvous 'job' closed while this node waited as a spare");
    if (lost_at_rejoin) throw RendezvousLost("1 node of job job stepped out and no spare waits");
    Assignment a;
    a.round = ++round_;
    return a;
  }
  void renew_worker_store() override {}
  bool elastic() const override { return elastic_; }
  std::chrono::milliseconds keep_alive_interval() const override {
    return elastic_ ? interval_ : std::chrono::milliseconds(0);
  }
  bool keep_alive() override {
    ++beats;
    return store_answers;
  }
  Liveness check_members() override {
    Liveness l{{}, 2};
    if (peer_dead) {
      l.dead = {1};
      l.alive = 1;
    }
    return l;
  }
  void watch(OnEvent) override {}
  void publish_failure(const std::string&) override {}
  RoundEvent finish_round() override { return RoundEvent::done; }
  std::vector<std::string> failure_records(std::chrono::milliseconds) override { return {}; }
  void leave(bool) override {}
  void inject(const StoreFault&) override {}
  // The job board: every record published, in order; a stop request made at
  // stop_at_ms (0: none) comes back with each publish.
  std::optional<board::StopRequest> publish_board(const std::string&, const std::string& record) override {
    std::lock_guard<std::mutex> lock(board_mu);
    board.push_back(record);
    if (stop_at_ms == 0) return std::nullopt;
    return board::StopRequest{stop_at_ms, "a test"};
  }

  // cxxrunctl's request watch: with block_watch_requests it holds the link
  // (at most kBlockBound) until abandon(), as a watch whose connect retries
  // a dead store does until read_timeout.
  static constexpr std::chrono::seconds kBlockBound{20};
  void watch_requests(OnRequest on_request) override {
    if (!on_request || !block_watch_requests) return;
    in_watch_requests.set_value();
    std::unique_lock<std::mutex> lock(abandon_mu);
    abandon_cv.wait_for(lock, kBlockBound, [&] { return abandons > 0; });
  }
  void abandon() override {
    {
      std::lock_guard<std::mutex> lock(abandon_mu);
      ++abandons;
    }
    abandon_cv.notify_all();
  }
  int abandoned() {
    std::lock_guard<std::mutex> lock(abandon_mu);
    return abandons;
  }

  std::atomic<bool> store_answers{true};
  std::atomic<int> beats{0};
  std::atomic<bool> peer_dead{false};
  bool block_rejoin = false;
  bool closed_at_rejoin = false;
  bool lost_at_rejoin = false;  // the next round filled without this node, and the job then succeeded
  std::atomic<long long> stop_at_ms{0};
  std::mutex board_mu;
  std::vector<std::string> board;
  std::promise<void> in_rejoin;
  std::shared_future<void> released;
  bool block_watch_requests = false;
  std::promise<void> in_watch_requests;

 private:
  std::mutex abandon_mu;
  std::condition_variable abandon_cv;
  int abandons = 0;
  const bool elastic_;
  const std::chrono::milliseconds interval_;
  int round_ = 0;
};

}  // namespace cxxrun::rendezvous
