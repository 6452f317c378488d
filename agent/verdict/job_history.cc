#include "agent/verdict/job_history.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <optional>

#include <spdlog/spdlog.h>

#include "agent/process/private_files.h"
#include "agent/verdict/judge.h"
#include "rendezvous/rendezvous.h"

namespace cxxrun::agent {
namespace {

std::optional<std::string> read_own_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);  // a run without one: none
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

// The history files of earlier runs of `run_id` in `base`: the run dirs
// "<run_id>_<random>" beside this one, at most kMaxSiblings looked at.
std::vector<std::string> earlier_files(const std::string& base, const std::string& run_id, const std::string& mine) {
  constexpr std::size_t kMaxSiblings = 10000;
  std::vector<std::string> files;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir(base.c_str()), closedir);
  if (!dir) return files;
  const std::string prefix = run_id + "_";
  for (std::size_t seen = 0; seen < kMaxSiblings; ++seen) {
    const dirent* e = readdir(dir.get());
    if (e == nullptr) break;
    const std::string name = e->d_name;
    // LogDir's names: the run id, '_', 8 characters of [a-z0-9_].
    if (name.size() != prefix.size() + 8 || name.rfind(prefix, 0) != 0 ||
        name.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_", prefix.size()) != std::string::npos)
      continue;
    const std::string run = base + "/" + name;
    if (run != mine) files.push_back(run + "/history.json");
  }
  return files;
}

}  // namespace

JobHistory::JobHistory(const Config& c, const std::string& run_dir) : rule_(c.restart_rule) {
  if (run_dir.empty() || rule_.always) return;
  file_ = run_dir + "/history.json";
  // Only a --log-dir the user named outlives a run; a temporary base is new.
  if (c.log_dir.empty()) return;
  const std::string base = run_dir.substr(0, run_dir.rfind('/'));
  std::string from;
  for (const std::string& path : earlier_files(base, c.run_id, run_dir)) {
    const auto text = read_own_file(path);
    if (!text || text->empty()) continue;
    const auto h = history_from_json(*text);
    if (!h) {
      spdlog::warn("ignoring the restart history {}: it does not parse", path);
      continue;
    }
    if (h->judged > last_.judged) {
      last_ = *h;
      from = path;
    }
  }
  if (from.empty()) return;
  last_.stop = false;  // a new run is a new decision; the count goes on
  judged_before_ = last_.judged;
  spdlog::info("continuing the restart history of job={} from {}: {} failed attempts judged, the last {}{}",
               c.run_id, from, last_.judged, last_.cause,
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
