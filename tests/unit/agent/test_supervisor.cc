// The supervisor's phase sequence with no process: fake workers (the Workers
// seam, agent/workers/workers.h) and a fake rendezvous behind the real link, driven
// by the supervisor's own loop. Each case is one way a job goes: a failure
// and a restart, the budget spent, a lost store, a dead peer, a signal while
// the rendezvous blocks.
#include <signal.h>
#include <sys/wait.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "agent/exit_codes.h"
#include "agent/workers/log_dir.h"
#include "agent/health/node_health.h"
#include "agent/supervisor.h"
#include "agent/workers/workers.h"
#include "rendezvous/rendezvous.h"
#include "fake_rendezvous.h"

using namespace cxxrun::agent;
using cxxrun::rendezvous::Assignment;
using cxxrun::rendezvous::FakeRendezvous;
using cxxrun::rendezvous::Rendezvous;
using cxxrun::rendezvous::RoundEvent;
using namespace std::chrono_literals;

namespace {

namespace asio = boost::asio;

// What attempt n's one worker does once started.
struct Outcome {
  enum Kind { succeed, fail, run, unkillable } kind = succeed;
  int code = 0;  // fail: its exit code
};

// Workers that start nothing: each attempt follows the script, and every
// callback comes through the loop, as the contract says.
class FakeWorkers final : public Workers {
 public:
  FakeWorkers(asio::io_context& io, Listener& listener, std::function<Outcome(int attempt)> script,
              std::vector<int>& starts, int& stops)
      : io_(io), listener_(listener), script_(std::move(script)), starts_(starts), stops_(stops),
        log_(spdlog::default_logger()) {}

  void observe_lines(LineObserver) override {}  // prints nothing
  void start(const Config&, const Assignment& placement, int attempt, const EnvHook&) override {
    starts_.push_back(attempt);
    failures_.clear();
    workers_.clear();
    auto w = std::make_unique<Worker>();
    w->rank = placement.base_rank;
    w->pid = 1000 + attempt;
    w->running = true;
    workers_.push_back(std::move(w));
    asio::post(io_, [this] { listener_.on_worker_started(*workers_[0]); });
    const Outcome o = script_(attempt);
    if (o.kind == Outcome::succeed) {
      asio::post(io_, [this] {
        workers_[0]->running = false;
        listener_.on_group_succeeded();
      });
    } else if (o.kind == Outcome::fail || o.kind == Outcome::unkillable) {
      asio::post(io_, [this, code = o.code, unkillable = o.kind == Outcome::unkillable] {
        workers_[0]->running = false;
        Failure f;
        f.unkillable = unkillable;
        f.rank = workers_[0]->rank;
        f.pid = workers_[0]->pid;
        set_status(f, W_EXITCODE(code, 0));
        f.time = std::chrono::system_clock::now();
        failures_.push_back(f);
        listener_.on_worker_failed(f);
      });
    }
  }
  void stop(int, bool) override {
    ++stops_;
    for (auto& w : workers_) w->running = false;
    asio::post(io_, [this] { listener_.on_group_stopped(); });
  }
  void escalate() override {}
  void signal_all(int) override {}
  bool signal_rank(int, int) override { return false; }
  void reap(const std::function<void(pid_t)>&) override {}
  void kill_process(pid_t, int, Killer, const std::string&, const std::string&,
                    const std::vector<std::string>&) override {}
  bool hung(int) const override { return false; }
  int running() const override {
    int n = 0;
    for (const auto& w : workers_) n += w->running ? 1 : 0;
    return n;
  }
  bool paused() const override { return false; }
  const std::vector<std::unique_ptr<Worker>>& workers() const override { return workers_; }
  const std::vector<Failure>& failures() const override { return failures_; }
  std::vector<pid_t> attempt_pids() const override { return {}; }
  unsigned long long output_bytes(int) const override { return 0; }
  const std::shared_ptr<spdlog::logger>& log() const override { return log_; }

 private:
  asio::io_context& io_;
  Listener& listener_;
  std::function<Outcome(int)> script_;
  std::vector<int>& starts_;
  int& stops_;
  std::shared_ptr<spdlog::logger> log_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::vector<Failure> failures_;
};

struct Job {
  Config config;
  std::vector<int> starts;
  int stops = 0;
  std::vector<int> exits_now;
  std::function<void()> on_exit_now;
  NodeHealth* health_ = nullptr;

  Job() {
    config.nproc_per_node = 1;
    config.entrypoint_name = "train";
    config.log_dir = "/dev/null";  // no files
    config.rdzv.settings.min_nodes = 2;
    config.rdzv.settings.max_nodes = 2;
    config.rdzv.settings.keep_alive_max_attempt = 3;
  }

  int run(Rendezvous& rdzv, std::function<Outcome(int)> script) {
    LogDir logs(config);
    const MakeWorkers fake = [&](asio::io_context& io, Workers::Listener& listener) -> std::unique_ptr<Workers> {
      return std::make_unique<FakeWorkers>(io, listener, script, starts, stops);
    };
    return supervise(config, Assignment{}, logs, nullptr, health_, rdzv, fake, [this](int code) {
      exits_now.push_back(code);
      if (on_exit_now) on_exit_now();
    });
  }
};

Outcome fail(int code) { return {Outcome::fail, code}; }

}  // namespace

TEST_CASE("supervisor: a failure restarts the group within the budget, and the restart succeeds") {
  Job job;
  job.config.max_restarts = 1;
  FakeRendezvous rdzv(false);
  const int code = job.run(rdzv, [](int attempt) { return attempt == 0 ? fail(3) : Outcome{}; });
  CHECK(code == 0);
  CHECK(job.starts == std::vector<int>{0, 1});
}

TEST_CASE("supervisor: with the budget spent the job exits with the failed worker's code") {
  Job job;
  job.config.max_restarts = 1;
  FakeRendezvous rdzv(false);
  const int code = job.run(rdzv, [](int) { return fail(3); });
  CHECK(code == 3);
  CHECK(job.starts == std::vector<int>{0, 1});
}

TEST_CASE("supervisor: a worker that outlives SIGKILL ends the job at once with the unkillable code") {
  Job job;
  job.config.max_restarts = 3;
  FakeRendezvous rdzv(false);
  const int code = job.run(rdzv, [](int) { return Outcome{Outcome::unkillable, 137}; });
  CHECK(code == exit_code::unkillable);
  CHECK(job.starts == std::vector<int>{0});  // no restart on an unhealthy node
}

TEST_CASE("supervisor: a lost store stops the running workers and exits 244") {
  Job job;
  FakeRendezvous rdzv(true);
  rdzv.store_answers = false;
  const int code = job.run(rdzv, [](int) { return Outcome{Outcome::run}; });
  CHECK(code == exit_code::lost);
  CHECK(job.stops == 1);
  CHECK(job.starts == std::vector<int>{0});
}

TEST_CASE("supervisor: cxxrunctl stop ends the job as SIGTERM does, and the board's last record shows the node done") {
  // The agent's last record is published after its link is gone: where the
  // store outlives the agent (etcd), a record left at "running" would keep
  // cxxrunctl stop waiting for a stop it cannot see.
  Job job;
  FakeRendezvous rdzv(true);
  rdzv.stop_at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                        (std::chrono::system_clock::now() + 1h).time_since_epoch())
                        .count();
  const int code = job.run(rdzv, [](int) { return Outcome{Outcome::run}; });
  CHECK(code == 128 + SIGTERM);
  CHECK(job.stops == 1);
  REQUIRE(rdzv.board.size() >= 2);
  CHECK(nlohmann::json::parse(rdzv.board.front())["phase"] == "running");
  CHECK(nlohmann::json::parse(rdzv.board.back())["phase"] == "done");
}

TEST_CASE("supervisor: a dead peer that leaves fewer than --nnodes' minimum stops the job with exit 244") {
  Job job;
  FakeRendezvous rdzv(true);
  rdzv.peer_dead = true;
  const int code = job.run(rdzv, [](int) { return Outcome{Outcome::run}; });
  CHECK(code == exit_code::lost);
  CHECK(job.stops == 1);
}

TEST_CASE("supervisor: a signal while the re-forming rendezvous blocks exits at once with 128 + signal") {
  Job job;
  job.config.max_restarts = 1;
  job.config.signals_to_handle = {SIGTERM};
  FakeRendezvous rdzv(true);
  rdzv.block_rejoin = true;
  std::promise<void> release;
  rdzv.released = release.get_future().share();
  std::atomic<bool> released{false};
  job.on_exit_now = [&] {
    if (!released.exchange(true)) release.set_value();
  };
  auto in_rejoin = rdzv.in_rejoin.get_future();
  std::thread signaller([&] {
    if (in_rejoin.wait_for(10s) == std::future_status::ready) raise(SIGTERM);
    else if (!released.exchange(true)) release.set_value();  // fails below rather than hangs
  });
  const int code = job.run(rdzv, [](int) { return fail(3); });
  // exit_now was asked for 143 (production: std::_Exit); here it returned,
  // and the loop ended with the same code once the rejoin was let go.
  if (job.exits_now.empty()) {
    signaller.join();
    FAIL("no exit during the rendezvous");
  }
  CHECK(job.exits_now == std::vector<int>{128 + SIGTERM});
  CHECK(code == 128 + SIGTERM);
  CHECK(job.starts == std::vector<int>{0});
  signaller.join();
}

TEST_CASE("supervisor: a signal while a rendezvous call holds the link abandons the call, not waits out its deadline") {
  // The store died while the link set up cxxrunctl's request watch, and a
  // signal came before the keep-alives judged the store lost (no beat is due
  // here): the exit joined the link until the watch's connect gave up, at
  // read_timeout.
  Job job;
  job.config.signals_to_handle = {SIGTERM};
  FakeRendezvous rdzv(true, 1h);
  rdzv.block_watch_requests = true;
  auto in_watch = rdzv.in_watch_requests.get_future();
  std::thread signaller([&] {
    // Never in the watch: the signal ends the job anyway, and the check of
    // abandon() below fails rather than the test hanging.
    in_watch.wait_for(10s);
    raise(SIGTERM);
  });
  const int code = job.run(rdzv, [](int) { return Outcome{Outcome::run}; });
  signaller.join();
  CHECK(code == 128 + SIGTERM);
  CHECK(rdzv.abandoned() == 1);
}

TEST_CASE("supervisor: a node that fails its health check before a restart steps out with 243") {
  Job job;
  job.config.max_restarts = 2;
  job.config.health.command = "echo 'GPU 3 needs a reset'; exit 1";
  NodeHealth health(job.config);
  job.health_ = &health;
  FakeRendezvous rdzv(false);
  const int code = job.run(rdzv, [](int) { return fail(3); });
  CHECK(code == cxxrun::agent::exit_code::node_unhealthy);
  CHECK(job.starts.size() == 1);  // the restart never spawned
  REQUIRE(health.last().size() == 1);
  CHECK(health.last()[0].name == "command");
  CHECK_FALSE(health.last()[0].healthy);
  CHECK_THAT(health.last()[0].detail, Catch::Contains("GPU 3 needs a reset"));
}

TEST_CASE("supervisor: a healthy node restarts after its checks") {
  Job job;
  job.config.max_restarts = 1;
  job.config.health.command = "true";
  NodeHealth health(job.config);
  job.health_ = &health;
  FakeRendezvous rdzv(false);
  const int code = job.run(rdzv, [](int attempt) { return attempt == 0 ? fail(3) : Outcome{}; });
  CHECK(code == 0);
  CHECK(job.starts.size() == 2);
  REQUIRE(health.last().size() == 1);
  CHECK(health.last()[0].healthy);
}

TEST_CASE("supervisor: a node whose workers keep failing first steps out at --max-node-failures") {
  Job job;
  job.config.max_restarts = 5;
  job.config.health.max_node_failures = 2;
  FakeRendezvous rdzv(false);
  const int code = job.run(rdzv, [](int) { return fail(3); });
  CHECK(code == cxxrun::agent::exit_code::node_unhealthy);
  CHECK(job.starts.size() == 2);  // failed twice, then out instead of a third start
}

TEST_CASE("supervisor: without --max-node-failures the budget decides") {
  Job job;
  job.config.max_restarts = 2;
  FakeRendezvous rdzv(false);
  CHECK(job.run(rdzv, [](int) { return fail(3); }) == 3);
  CHECK(job.starts.size() == 3);
}

TEST_CASE("supervisor: a member left out of the next round as a spare exits 0 when the job succeeds") {
  Job job;
  job.config.max_restarts = 1;
  FakeRendezvous rdzv(true);
  rdzv.closed_at_rejoin = true;
  CHECK(job.run(rdzv, [](int) { return fail(3); }) == cxxrun::agent::exit_code::spare_released);
}

TEST_CASE("supervisor: with no spare, a member that stepped out elsewhere is the job lost (244)") {
  Job job;
  job.config.max_restarts = 1;
  FakeRendezvous rdzv(true);
  rdzv.lost_at_rejoin = true;
  CHECK(job.run(rdzv, [](int) { return fail(3); }) == cxxrun::agent::exit_code::lost);
}
