#include "agent/verdict/job_history.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <optional>

#include <spdlog/spdlog.h>

#include "agent/process/private_files.h"
#include "agent/verdict/judge.h"
#include "rendezvous/rendezvous.h"

namespace cxxrun::agent {
namespace {

// A run id is the user's text: it names one file in the log dir, never a
// path elsewhere.
std::string file_name(const std::string& run_id) {
  std::string name = run_id.empty() ? "none" : run_id;
  for (char& ch : name)
    if (ch == '/' || ch == '\0') ch = '_';
  if (name[0] == '.') name.insert(0, "_");
  return name + ".history.json";
}

std::optional<std::string> read_own_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return std::nullopt;
  struct stat st {};
  std::string text;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == ::geteuid() && st.st_size < (1 << 20)) {
    char buffer[4096];
    ssize_t n = 0;
    while ((n = ::read(fd, buffer, sizeof buffer)) > 0) text.append(buffer, static_cast<size_t>(n));
  } else {
    spdlog::warn("ignoring the restart history {}: not a regular file of this user's", path);
  }
  ::close(fd);
  return text;
}

}  // namespace

JobHistory::JobHistory(const Config& c) : rule_(c.restart_rule) {
  if (c.log_dir.empty() || c.log_dir == "/dev/null" || rule_.always) return;
  file_ = c.log_dir + "/" + file_name(c.rdzv.settings.run_id);
  const auto text = read_own_file(file_);
  if (!text || text->empty()) return;
  const auto h = history_from_json(*text);
  if (!h) {
    spdlog::warn("ignoring the restart history {}: it does not parse", file_);
    return;
  }
  last_ = *h;
  last_.stop = false;  // a new run is a new decision; the count goes on
  spdlog::info("continuing the restart history of job={} from {}: {} failed attempts judged, the last {}{}",
               c.rdzv.settings.run_id, file_, last_.judged, last_.cause,
               last_.repeats > 1 ? " (" + std::to_string(last_.repeats) + " in a row without progress)" : "");
}

JobHistory::Ask JobHistory::ask(const NodeOutcome& mine, std::vector<Failure> local, const std::string& host,
                                int round, std::chrono::milliseconds wait) const {
  return Ask{to_json(mine), std::move(local), host, last_, rule_, round, wait};
}

std::string JobHistory::settle(rendezvous::Rendezvous& r, const Ask& a) {
  std::vector<NodeOutcome> nodes;
  for (const std::string& line : r.attempt_records(a.mine, a.wait))
    if (auto o = node_outcome_from_json(line)) nodes.push_back(*o);
  if (nodes.empty())
    if (auto o = node_outcome_from_json(a.mine)) nodes.push_back(*o);
  JobOutcome now{merge(nodes), std::nullopt};
  // Every node's workers have stopped (or the wait ran out): their failures
  // are published, and the root cause is the summary's.
  const std::vector<Failure> failures = job_failures(r.published_failures(), a.local, a.host);
  for (const Failure& f : failures)
    if (!f.stopped) {
      now.root = signature_of(f);
      break;
    }
  if (!now.root && !failures.empty()) now.root = signature_of(failures.front());
  return r.settle_verdict([&](const std::string& stored) {
    History last = a.last;
    if (auto theirs = history_from_json(stored); theirs && theirs->judged >= last.judged) last = *theirs;
    return to_json(judge(last, now, a.rule, a.round));
  });
}

const History& JobHistory::adopt(const std::string& settled) {
  const auto h = history_from_json(settled);
  if (!h) {
    spdlog::warn("the settled restart verdict does not parse; restarting as --max-restarts allows: {}", settled);
    return last_;
  }
  last_ = *h;
  save();
  return last_;
}

void JobHistory::save() const {
  if (file_.empty()) return;
  // Written whole and renamed into place: an agent killed meanwhile leaves
  // the last verdict, never half of one.
  const std::string temp = file_ + "." + std::to_string(::getpid()) + ".tmp";
  std::string why_not;
  if (!write_private_file(temp, to_json(last_) + "\n", false, why_not)) {
    spdlog::warn("cannot keep the restart history in {}: {}", file_, why_not);
    return;
  }
  if (std::rename(temp.c_str(), file_.c_str()) != 0) {
    spdlog::warn("cannot keep the restart history in {}: rename failed", file_);
    ::unlink(temp.c_str());
  }
}

}  // namespace cxxrun::agent
