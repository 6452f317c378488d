// Workers stopped by a signal (SIGSTOP, SIGTSTP, a debugger): each one's
// Worker::paused_since, set and cleared as the kernel reports it, and while
// every worker still running is stopped, a warning every kPausedReminder
// naming them, since nothing but SIGCONT or a kill can end the job then.
// Part of the worker group (agent/workers/worker_group.h), on its loop.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/logger.h>

#include "agent/workers/workers.h"

namespace cxxrun::agent {

// How often the agent says that only stopped workers keep the job alive.
inline constexpr std::chrono::seconds kPausedReminder{30};

class PausedWorkers {
 public:
  // `workers` and `log` (the group's, replaced at each attempt, so held by
  // reference) must outlive it; no reminder is given while `stopping` says so.
  PausedWorkers(boost::asio::io_context& io, const std::vector<std::unique_ptr<Worker>>& workers,
                const std::shared_ptr<spdlog::logger>& log, std::function<bool()> stopping);

  // `status` (wait4's, with WUNTRACED | WCONTINUED) stopped or continued `w`:
  // logs it and returns true when w.paused_since changed.
  bool changed(Worker& w, int status);
  // Whether a running worker is stopped.
  bool any() const;
  // No more reminders (the group stopped).
  void cancel();

 private:
  void remind();

  const std::vector<std::unique_ptr<Worker>>& workers_;
  const std::shared_ptr<spdlog::logger>& log_;
  const std::function<bool()> stopping_;
  boost::asio::steady_timer timer_;
};

}  // namespace cxxrun::agent
