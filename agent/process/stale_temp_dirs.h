// Temporary directories an agent and its guardian both left behind: the
// guardian removes the agent's temporary directories after an agent SIGKILL
// (agent/process/guardian.h), but a scheduler that SIGKILLs every process of
// a step (Slurm past KillWait, a container's OOM kill, `kill -9` of both)
// takes the guardian along, and nothing else removes them. So each such
// directory carries its owner in its name, given by the mkdtemp template
// itself (no moment exists where it is made without it): the agent's pid,
// the process's start time (/proc/<pid>/stat field 22, so that a pid reused
// by another process is not taken for the owner) and its pid namespace (a
// TMPDIR shared with a container, whose pids mean other processes). The
// next agent's start removes those whose owner is gone.
#pragma once

#include <string>

namespace cxxrun::agent {

// The temporary directories an agent makes, each named with its prefix by
// owned_temp_template and swept by the next agent's start: the Python hook's
// (agent.cc), the forkserver's sitecustomize (agent/warm/zygote.cc), the
// heartbeat pages without a run directory (agent/hang/heartbeat_monitor.cc)
// and the file timer's FIFO (agent/hang/file_timer.cc).
inline constexpr const char* kHookDirPrefix = "cxxrun-hook-";
inline constexpr const char* kForkserverDirPrefix = "cxxrun-forkserver-";
inline constexpr const char* kHeartbeatDirPrefix = "cxxrun_heartbeat_";
inline constexpr const char* kTimerDirPrefix = "cxxrun_timer_";
inline constexpr const char* kOwnedTempDirPrefixes[] = {kHookDirPrefix, kForkserverDirPrefix, kHeartbeatDirPrefix,
                                                        kTimerDirPrefix};

// "<dir>/<prefix><pid namespace>-<pid>-<start time>-XXXXXX" for this
// process, a template for mkdtemp (or Guardian::make_temp_dir).
std::string owned_temp_template(const std::string& dir, const std::string& prefix);

// Removes the directories in `dir` named by owned_temp_template with
// `prefix` whose owner is gone: only where the entry is itself a directory
// (never a link, never followed) owned by this effective uid, and its
// recorded pid namespace is this process's (another namespace's pids cannot
// be judged here), in a `dir` no other user can change
// (agent/process/private_files.h: replaceable_by_others). Names without an owner (older cxxrun versions) are left
// alone: nothing tells whether their agent, perhaps running for days, still
// needs them. Returns how many were removed. Never throws.
int remove_stale_temp_dirs(const std::string& dir, const std::string& prefix);

}  // namespace cxxrun::agent
