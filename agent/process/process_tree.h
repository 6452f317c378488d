// Finding every process a job started, wherever it went. Each worker carries
// CXXRUN_JOB_TOKEN in its environment and its descendants inherit it, so a
// walk over /proc finds grandchildren that changed session, daemonized or
// were reparented after their parent died.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace cxxrun::agent {

// Live (non-zombie) processes whose environment holds an entry starting with
// `token_prefix` (e.g. "CXXRUN_JOB_TOKEN=abcd:"). Never includes the caller.
std::vector<pid_t> find_processes_with_env(const std::string& token_prefix);

// Sends `sig` to each process found; returns how many were signalled.
int signal_processes_with_env(const std::string& token_prefix, int sig);

// Live descendants of `root` (children, their children, ...), except those
// in `except` and their own descendants. For a child subreaper this is every
// process it started that has not been reaped, wherever it moved or
// whatever it changed in its environment.
std::vector<pid_t> find_descendants(pid_t root, const std::vector<pid_t>& except);

// CPU time (user + system, its reaped children's included) of each root's
// tree: the root and its live descendants, from one walk over /proc. A root
// that is gone reads 0.
std::map<pid_t, std::chrono::nanoseconds> tree_cpu_time(const std::vector<pid_t>& roots);

// What a process that will not die is doing, from /proc: "state D
// (uninterruptible sleep), waiting in nfs_wait_bit_killable". Says so when
// the process is gone or the kernel hides its wait channel.
std::string wait_state(pid_t pid);

// /proc/<pid>/stat's starttime (clock ticks after boot); 0 when gone. With
// the pid it names one process: a pid reused since has another.
unsigned long long process_start_time(pid_t pid);

}  // namespace cxxrun::agent
