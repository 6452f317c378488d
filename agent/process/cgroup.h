// Containment by cgroup v2: every process a job starts lives in the job's
// cgroup, in a child per attempt, so an attempt stops with one write to
// cgroup.kill whatever its processes did to hide (setsid, env -i, a double
// fork). The agent itself stays outside, in the cgroup it was started in.
//
// Needs a writable cgroup2 tree (root, or a delegated subtree). Where there is
// none, JobCgroup::create() says why and the agent falls back to what it is
// anyway, a child subreaper (agent/workers/worker_group.cc).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/process/spawn.h"

namespace cxxrun::agent {

class JobCgroup {
 public:
  // <cgroup2 mount><the agent's own cgroup>/cxxrun-<job_token>, made now.
  // nullptr when not possible, with the reason in `why_not`. `before_made`
  // is told its path before it exists (the guardian, which removes it if the
  // agent dies: agent/process/guardian.h).
  static std::unique_ptr<JobCgroup> create(const std::string& job_token, std::string& why_not,
                                           const std::function<void(const std::string&)>& before_made = {});
  // Kills what is left and removes the job's directories, waiting up to 5 s
  // for them to empty; after abandon(), not at all.
  ~JobCgroup();
  JobCgroup(const JobCgroup&) = delete;
  JobCgroup& operator=(const JobCgroup&) = delete;

  const std::string& path() const { return path_; }
  // Makes attempt-<n> and returns where new workers start: descriptors
  // (close on exec) of its directory and its cgroup.procs. Throws
  // std::runtime_error.
  CgroupTarget begin_attempt(int attempt);
  // Makes <job>/<name> for a process that outlives attempts (the
  // forkserver) and returns where it starts; the caller closes the
  // descriptors. Throws std::runtime_error.
  CgroupTarget open_child(const std::string& name);
  // The processes of the current attempt, wherever they went.
  std::vector<pid_t> attempt_pids() const;
  // SIGKILL to every process of the current attempt, in one write.
  void kill_attempt() const;
  // Kills what is left of the attempt. Its directory goes when it can
  // (an exiting process leaves it a moment later): never waited for here,
  // so a restart is not held up.
  void end_attempt();
  // A process in it outlived SIGKILL (uninterruptible sleep): waiting for
  // the tree to empty is pointless. It is left behind, and said so.
  void abandon() { abandoned_ = true; }

 private:
  explicit JobCgroup(std::string path) : path_(std::move(path)) {}

  std::string path_;
  bool abandoned_ = false;
  // Removes finished attempts' directories that are empty by now.
  void sweep();

  std::string attempt_;  // "" between attempts
  CgroupTarget target_;
  std::vector<std::string> finished_;
};

// The name of this agent's cgroups for the job `job_token`, in every
// hierarchy: "cxxrun-<agent pid>-<job_token>". The pid tells a later agent
// whether the one that made it is gone (remove_stale_job_cgroups).
std::string job_cgroup_name(const std::string& job_token);

// Removes, children first and only where empty, the job cgroups in `parent`
// whose agent is gone: a scheduler that SIGKILLs every process of a step
// (Slurm past KillWait) takes the guardian along, and nothing else removes
// them. Never kills: a cgroup with a process in it stays.
void remove_stale_job_cgroups(const std::string& parent);

// Kills every process under the cgroup at `path` (its children too: a
// nested job), waits (up to `limit`) until each is empty, and removes them
// all. The guardian runs it after the agent died. False, with errno, when
// the tree could not be removed.
bool kill_and_remove_cgroup(const std::string& path, std::chrono::milliseconds limit = std::chrono::seconds(5));

}  // namespace cxxrun::agent
