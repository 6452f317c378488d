// How a worker group starts its Python workers warm, attempt by attempt,
// from the node's forkserver (agent/warm/forkserver.h): it waits for the
// zygote's preload without blocking the loop, forks each worker from it, and
// falls back to exec for the rest of the attempt with one line saying why;
// while a learning forkserver has no zygote yet, it looks at what the
// running workers import now and then. Owned by the WorkerGroup, on its loop.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <spdlog/logger.h>

#include "agent/warm/zygote.h"

namespace cxxrun::agent {

class Forkserver;

class WarmStart {
 public:
  // `forkserver` nullptr: every worker starts by exec.
  WarmStart(boost::asio::io_context& io, Forkserver* forkserver);
  ~WarmStart();
  WarmStart(const WarmStart&) = delete;
  WarmStart& operator=(const WarmStart&) = delete;

  // A new attempt: runs `go` once its workers may start, at once or when
  // the zygote finished its preload (or was given up after
  // Zygote::kPreloadDeadline). Workers start by exec where there is no
  // zygote ready by then.
  void begin(std::shared_ptr<spdlog::logger> log, int attempt, std::function<void()> go);
  // Forks one worker; -1: start it by exec, as the rest of this attempt.
  pid_t fork(const Zygote::Fork& request);
  // The attempt's workers are running: `pids` gives them, for a learning
  // forkserver to look at (Forkserver::kFirstLook, doubling to kLastLook).
  void started(std::function<std::vector<pid_t>()> pids);
  // A reaped child: true if it was the zygote (it is gone then).
  bool reaped(pid_t pid, int status);
  // The zygote's pid, -1 when there is none: not one of the job's strays.
  pid_t zygote_pid() const;
  // The attempt is stopping: no more waiting or looking.
  void stop();

 private:
  Zygote* zygote() const;
  void wait_for_preload(std::function<void()> go);
  void look(std::chrono::milliseconds after);

  boost::asio::io_context& io_;
  Forkserver* const forkserver_;
  std::shared_ptr<spdlog::logger> log_;
  int attempt_ = 0;
  bool by_exec_ = true;  // this attempt's workers start by exec
  std::unique_ptr<boost::asio::posix::stream_descriptor> ready_;
  boost::asio::steady_timer preload_timer_;
  boost::asio::steady_timer look_timer_;
  std::function<std::vector<pid_t>()> pids_;
  std::chrono::steady_clock::time_point started_{};
};

}  // namespace cxxrun::agent
