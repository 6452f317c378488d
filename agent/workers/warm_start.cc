#include "agent/workers/warm_start.h"

#include <unistd.h>

#include "agent/warm/forkserver.h"

namespace cxxrun::agent {

namespace asio = boost::asio;
using std::chrono::milliseconds;

WarmStart::WarmStart(asio::io_context& io, Forkserver* forkserver)
    : io_(io), forkserver_(forkserver), preload_timer_(io), look_timer_(io) {}

WarmStart::~WarmStart() {
  if (ready_) ready_->release();  // the zygote closes its own descriptor
}

Zygote* WarmStart::zygote() const { return forkserver_ ? forkserver_->zygote() : nullptr; }

pid_t WarmStart::zygote_pid() const { return zygote() ? zygote()->pid() : -1; }

void WarmStart::begin(std::shared_ptr<spdlog::logger> log, int attempt, std::function<void()> go) {
  log_ = std::move(log);
  attempt_ = attempt;
  stop();
  Zygote* z = zygote();
  by_exec_ = z == nullptr || z->state() == Zygote::State::gone;
  if (!by_exec_ && z->state() == Zygote::State::preloading) return wait_for_preload(std::move(go));
  go();
}

// Without blocking the loop: a signal meanwhile still stops the job.
void WarmStart::wait_for_preload(std::function<void()> go) {
  log_->info("waiting for the forkserver to finish its preload");
  if (ready_) ready_->release();  // an earlier attempt's wait
  ready_ = std::make_unique<asio::posix::stream_descriptor>(io_, zygote()->fd());
  ready_->async_wait(asio::posix::stream_descriptor::wait_read, [this, go](const boost::system::error_code& ec) {
    if (ec == asio::error::operation_aborted) return;
    preload_timer_.cancel();
    ready_->release();  // the zygote's own descriptor
    zygote()->read_ready();
    go();
  });
  preload_timer_.expires_after(Zygote::kPreloadDeadline);
  preload_timer_.async_wait([this, go](const boost::system::error_code& ec) {
    if (ec) return;
    boost::system::error_code ignored;
    ready_->cancel(ignored);
    ready_->release();
    zygote()->give_up("its preload took longer than " + std::to_string(Zygote::kPreloadDeadline.count()) + " s");
    go();
  });
}

pid_t WarmStart::fork(const Zygote::Fork& request) {
  if (by_exec_) return -1;
  std::string why;
  const pid_t pid = zygote()->fork_worker(request, why);
  if (pid >= 0) return pid;
  by_exec_ = true;
  // A zygote that is gone said so itself, once (Zygote::exited, give_up),
  // even when that happened during this attempt's wait for its preload.
  if (zygote()->state() == Zygote::State::gone) return -1;
  // One the user never asked for says so once: what made it unsafe stays.
  if (forkserver_->learned()) zygote()->give_up(why + "; attempt " + std::to_string(attempt_) + " starts by exec");
  else log_->warn("{}; attempt {} starts its workers by exec", why, attempt_);
  return -1;
}

void WarmStart::started(std::function<std::vector<pid_t>()> pids) {
  if (!forkserver_ || !forkserver_->learning()) return;
  pids_ = std::move(pids);
  started_ = std::chrono::steady_clock::now();
  look(Forkserver::kFirstLook);
}

// Learning first (kFirstLook, doubling), then whether the workers are up
// (every kSettleLook), until kLastLook.
void WarmStart::look(milliseconds after) {
  look_timer_.expires_at(started_ + after);
  look_timer_.async_wait([this, after](const boost::system::error_code& ec) {
    if (ec || after > Forkserver::kLastLook) return;
    if (forkserver_->learning()) {
      forkserver_->learn(pids_(), after);
      if (forkserver_->learning()) return look(after * 2);
    }
    if (!forkserver_->settle(pids_())) look(after + Forkserver::kSettleLook);
  });
}

bool WarmStart::reaped(pid_t pid, int status) {
  Zygote* z = zygote();
  if (!z || pid != z->pid()) return false;
  z->exited(status);
  return true;
}

void WarmStart::stop() {
  look_timer_.cancel();
}

}  // namespace cxxrun::agent
