// The agent's signals, handled on its loop. SIGCHLD reaps: the worker group
// reaps its workers, and any other child reaped is the guardian, whose exit
// is logged (workers are no longer protected against the agent's death).
// Of --signals-to-handle, one in Config::forward_only_signals only reaches
// the workers (what cxxrun added itself, today Slurm's SIGUSR1); every other
// ends the job: `ends_job(sig)`.
#pragma once

#include <functional>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <spdlog/logger.h>

#include "agent/config.h"
#include "agent/workers/workers.h"

namespace cxxrun::agent {

class Guardian;

class SignalWatch {
 public:
  // `group`, `config`, and `log` (the node's logger, replaced at each round,
  // so held by reference) must outlive it; `guardian` may be null.
  SignalWatch(boost::asio::io_context& io, const Config& config, Workers& group, Guardian* guardian,
              const std::shared_ptr<spdlog::logger>& log, std::function<void(int sig)> ends_job);

  // Listens from now until cancel().
  void start();
  // No handler runs after it, even one called from a handler.
  void cancel();

 private:
  void wait();
  void on_other_child(pid_t pid);

  boost::asio::signal_set signals_;
  const Config& config_;
  Workers& group_;
  Guardian* guardian_;
  const std::shared_ptr<spdlog::logger>& log_;
  const std::function<void(int)> ends_job_;
  bool cancelled_ = false;
};

}  // namespace cxxrun::agent
