#include "agent/workers/kill_ledger.h"

#include <algorithm>
#include <vector>

#include "agent/forensics/failure.h"

namespace cxxrun::agent {

KillLedger::KillLedger(boost::asio::io_context& io, std::function<void(pid_t)> overdue)
    : overdue_(std::move(overdue)), timer_(io) {}

void KillLedger::clear() {
  kills_.clear();
  stop_watching();
}

void KillLedger::note(pid_t pid, Killer by, const std::string& why, const std::string& stack,
                      const std::vector<std::string>& no_root_cause) {
  kills_.insert({pid, Kill{by, why, stack, no_root_cause}});
}

bool KillLedger::killed_by(pid_t pid, Killer by) const {
  const auto kill = kills_.find(pid);
  return kill != kills_.end() && kill->second.by == by;
}

void KillLedger::apply(Failure& f, bool traceback) const {
  const auto kill = kills_.find(f.pid);
  if (kill == kills_.end()) return;
  f.killed_by = kill->second.by;
  f.kill_reason = kill->second.why;
  f.no_root_cause = kill->second.no_root_cause;
  // The summary's traceback: what it was doing when cxxrun killed it.
  if (traceback && !kill->second.stack.empty() && !read_error_file(f.error_file)) f.message = kill->second.stack;
}

void KillLedger::watch(pid_t pid, std::chrono::milliseconds limit) {
  if (deadlines_.count(pid)) return;
  deadlines_[pid] = std::chrono::steady_clock::now() + limit;
  check();
}

void KillLedger::stop_watching() {
  timer_.cancel();
  deadlines_.clear();
}

void KillLedger::check() {
  const auto now = std::chrono::steady_clock::now();
  auto next = std::chrono::steady_clock::time_point::max();
  std::vector<pid_t> due;
  for (auto it = deadlines_.begin(); it != deadlines_.end();) {
    if (it->second > now) {
      next = std::min(next, it->second);
      ++it;
    } else {
      due.push_back(it->first);
      it = deadlines_.erase(it);
    }
  }
  for (pid_t pid : due) overdue_(pid);
  if (next == std::chrono::steady_clock::time_point::max()) return;
  timer_.expires_at(next);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) check();
  });
}

}  // namespace cxxrun::agent
