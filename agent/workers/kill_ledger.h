// cxxrun's own kills of one attempt's processes: which part of cxxrun sent
// each and why, so the failure names it (agent/forensics/death.h), and how long a
// worker it SIGKILLed may take to die (--kill-timeout) before the group
// gives up on it as unkillable. A passive object on the worker group's loop.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/forensics/killer.h"

namespace cxxrun::agent {

struct Failure;

class KillLedger {
 public:
  // `overdue(pid)`: a watched pid outlived its deadline (called on the loop).
  KillLedger(boost::asio::io_context& io, std::function<void(pid_t pid)> overdue);

  // A new attempt: nothing noted, nothing watched.
  void clear();
  // cxxrun kills `pid` (by `by`, for `why`; `stack`: what it was doing;
  // `no_root_cause`: Failure::no_root_cause). The first reason stands.
  void note(pid_t pid, Killer by, const std::string& why, const std::string& stack = "",
            const std::vector<std::string>& no_root_cause = {});
  // Whether `pid` was noted as killed by `by`.
  bool killed_by(pid_t pid, Killer by) const;
  // Copies the kill of f.pid into `f`; with `traceback`, its stack becomes
  // the failure's message when the worker wrote no error file.
  void apply(Failure& f, bool traceback) const;

  // `pid` got cxxrun's SIGKILL: overdue(pid) after `limit` unless ended()
  // first. A pid already watched keeps its deadline.
  void watch(pid_t pid, std::chrono::milliseconds limit);
  void ended(pid_t pid) { deadlines_.erase(pid); }
  void stop_watching();

 private:
  struct Kill {
    Killer by = Killer::none;
    std::string why;
    std::string stack;
    std::vector<std::string> no_root_cause;
  };
  void check();

  std::function<void(pid_t)> overdue_;
  boost::asio::steady_timer timer_;
  std::map<pid_t, Kill> kills_;
  std::map<pid_t, std::chrono::steady_clock::time_point> deadlines_;
};

}  // namespace cxxrun::agent
