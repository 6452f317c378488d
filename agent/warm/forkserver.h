// Whether Python workers start warm, forked from a zygote (agent/warm/zygote.h),
// and when that zygote starts: the one home of that decision at run time
// (the launcher picks the mode, launcher/start_method.cc; the design is
// docs/forkserver.md).
//
// --start-method=forkserver: the zygote starts with the agent and imports its
// preload list while the rendezvous runs; the first attempt waits for it.
//
// The default for a Python program (ForkserverOptions::learn):
// - A script that imports torch at its top level (agent/warm/script_imports.h)
//   will import it in every worker: the zygote starts at once and imports it
//   a single time for the node, and the first attempt forks from it, as
//   under forkserver. Its first launch is as fast as spawn's, faster where
//   the workers outnumber the cores (one import instead of one a worker), and
//   it is warm however early the first failure comes.
// - Any other: the first attempt starts by exec at once, exactly as spawn,
//   so a first launch is never slower. While its workers run, the agent
//   looks at what they have mapped (/proc/<pid>/maps: the native parts of
//   the packages they imported, torch's libtorch, numpy's core) and, the
//   first time it sees some, starts the zygote with those packages preloaded
//   at idle priority: warm by the first restart. A program that imports
//   nothing native never gets one (it would gain nothing a fork could give).
// Where a warm fork is not safe (a preload that started a thread, CUDA
// initialised, an interpreter the zygote cannot serve) the zygote refuses or
// is gone, and workers start by exec with one line saying why
// (agent/workers/worker_group.cc).
//
// Thread rule: the agent's loop (constructed before it runs).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/config.h"

namespace cxxrun::agent {

class JobCgroup;
class Zygote;

class Forkserver {
 public:
  // When a learning agent looks at its workers, from an attempt's start:
  // early enough that a job which fails in its first seconds has learned,
  // rarely enough to cost nothing (one read of one worker's maps).
  static constexpr std::chrono::milliseconds kFirstLook{500};
  static constexpr std::chrono::milliseconds kLastLook{32'000};
  // Once learned, how often the agent looks whether the workers are up, and
  // how many looks in a row their maps must stay the same: an import maps
  // files in bursts, with stretches of pure Python between them.
  static constexpr std::chrono::milliseconds kSettleLook{250};
  static constexpr int kSettledLooks = 4;

  // Starts the zygote at once for --start-method=forkserver; a learning one
  // waits for learn(). Never throws: a zygote that cannot start is said in
  // one line, and every worker starts by exec.
  Forkserver(const Config& config, std::string job_token, JobCgroup* cgroup);
  ~Forkserver();
  Forkserver(const Forkserver&) = delete;
  Forkserver& operator=(const Forkserver&) = delete;

  // The zygote; nullptr while there is none (yet).
  Zygote* zygote() const { return zygote_.get(); }
  // Whether learn() may still start one.
  bool learning() const { return learning_; }
  // Whether the zygote is one the default start method started (the user
  // did not ask for it: the first fork it refuses ends it, in one line).
  bool learned() const { return config_.forkserver.learn; }
  // Looks at what `workers` (one attempt's, running) have mapped; starts the
  // zygote with their packages preloaded once there are some. `after`: how
  // long since their attempt started, for the log line.
  void learn(const std::vector<pid_t>& workers, std::chrono::milliseconds after);
  // A learned zygote preloads at idle priority (agent/python/zygote.py, _idle), so
  // that it never slows the workers' own start. Once their maps stop
  // growing for kSettledLooks looks they are up, and it gets a fair share of the
  // CPU, so that it is warm soon even where training keeps every core
  // busy. True once there is nothing more to look at.
  bool settle(const std::vector<pid_t>& workers);

 private:
  void start(const std::vector<std::string>& preload, bool given, bool idle);

  const Config& config_;
  const std::string token_;
  JobCgroup* const cgroup_;
  bool learning_ = false;
  long mapped_ = -1;  // lines of the first worker's maps at the last settle()
  int same_ = 0;      // looks in a row that found them so
  std::unique_ptr<Zygote> zygote_;
};

// The packages whose native code a process has mapped, in the order of its
// /proc/<pid>/maps text: the first directory under a site-packages or
// dist-packages directory, where it is a Python identifier and holds an
// __init__.py (`exists` says whether a path is a file; the real one in
// learn()).
std::vector<std::string> native_packages(std::string_view maps, bool (*exists)(const std::string& path));

// What a zygote preloads for the packages a worker imported: torch first,
// with torch.distributed (which its workers import at init_process_group),
// then the others in the order seen, at most kMaxLearned.
inline constexpr size_t kMaxLearned = 8;
std::vector<std::string> preload_for(const std::vector<std::string>& packages);

}  // namespace cxxrun::agent
