#include "agent/workers/paused_workers.h"

#include <sys/wait.h>

#include <string>

#include "agent/forensics/failure.h"

namespace cxxrun::agent {

PausedWorkers::PausedWorkers(boost::asio::io_context& io, const std::vector<std::unique_ptr<Worker>>& workers,
                             const std::shared_ptr<spdlog::logger>& log, std::function<bool()> stopping)
    : workers_(workers), log_(log), stopping_(std::move(stopping)), timer_(io) {}

bool PausedWorkers::changed(Worker& w, int status) {
  if (WIFSTOPPED(status)) {
    if (w.paused_since) return false;
    w.paused_since = std::chrono::system_clock::now();
    log_->warn("rank {} (local_rank {}, pid {}) was stopped by {}; the job waits for it until it gets SIGCONT", w.rank,
               w.local_rank, w.pid, signal_name(WSTOPSIG(status)));
    if (!stopping_()) remind();
    return true;
  }
  if (WIFCONTINUED(status) && w.paused_since) {
    w.paused_since.reset();
    log_->info("rank {} (local_rank {}, pid {}) continued", w.rank, w.local_rank, w.pid);
    return true;
  }
  return false;
}

bool PausedWorkers::any() const {
  for (const auto& w : workers_)
    if (w->running && w->paused_since) return true;
  return false;
}

void PausedWorkers::cancel() { timer_.cancel(); }

void PausedWorkers::remind() {
  timer_.expires_after(kPausedReminder);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || stopping_() || !any()) return;
    std::string who;
    for (const auto& w : workers_) {
      if (!w->running) continue;
      if (!w->paused_since) return remind();  // someone still works
      who += (who.empty() ? "" : ", ") + ("rank " + std::to_string(w->rank) + " (pid " + std::to_string(w->pid) +
                                          ", since " + clock_time(*w->paused_since) + ")");
    }
    if (who.empty()) return;
    log_->warn("only stopped workers keep the job alive: {}; send them SIGCONT or stop the job", who);
    remind();
  });
}

}  // namespace cxxrun::agent
