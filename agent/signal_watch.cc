#include "agent/signal_watch.h"

#include <signal.h>

#include "agent/forensics/failure.h"
#include "agent/process/guardian.h"

namespace cxxrun::agent {

SignalWatch::SignalWatch(boost::asio::io_context& io, const Config& config, Workers& group, Guardian* guardian,
                         const std::shared_ptr<spdlog::logger>& log, std::function<void(int sig)> ends_job)
    : signals_(io), config_(config), group_(group), guardian_(guardian), log_(log), ends_job_(std::move(ends_job)) {}

void SignalWatch::start() {
  signals_.add(SIGCHLD);
  for (int sig : config_.signals_to_handle) signals_.add(sig);
  // Blocked since the agent started (agent/agent.cc): one that came
  // meanwhile is handled now, on this thread, the loop's.
  sigset_t forward;
  sigemptyset(&forward);
  for (int sig : config_.forward_only_signals) sigaddset(&forward, sig);
  pthread_sigmask(SIG_UNBLOCK, &forward, nullptr);
  wait();
}

void SignalWatch::cancel() {
  cancelled_ = true;
  boost::system::error_code ignored;
  signals_.cancel(ignored);
}

void SignalWatch::wait() {
  signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
    if (ec || cancelled_) return;
    if (sig == SIGCHLD) {
      group_.reap([this](pid_t pid) { on_other_child(pid); });
    } else if (config_.forward_only_signals.count(sig) > 0) {
      log_->info("forwarding {} to {} workers", signal_name(sig), group_.running());
      group_.signal_all(sig);
    } else {
      ends_job_(sig);
    }
    // The job may have ended in the handler (cancel()): no more waiting.
    if (!cancelled_) wait();
  });
}

void SignalWatch::on_other_child(pid_t pid) {
  if (guardian_ == nullptr || pid != guardian_->pid()) return;
  guardian_->mark_reaped();
  log_->warn("the guardian process exited; workers are no longer protected against the agent's death");
}

}  // namespace cxxrun::agent
