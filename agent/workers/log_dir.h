// torchrun's log layout (docs/torchrun-compat.md §6):
//   <base>/<run_id>_<random>/attempt_<n>/<local_rank>/{stdout.log,stderr.log,error.json}
// base is --log-dir, or a fresh temp dir "torchelastic_*" that is removed at
// exit when nothing was redirected into it and the job succeeded.
// <run_id>_<random> is always a fresh directory, 0700 whatever the umask
// (torchrun's mkdtemp), and every directory in it 0700 (agent/process/private_files.h):
// another local user can neither read the logs nor plant anything in it.
#pragma once

#include <string>

#include "agent/config.h"

namespace cxxrun::agent {

class Guardian;

class LogDir {
 public:
  // A temporary base removed at exit is made by `guardian` where given, so
  // that it goes with an agent killed at any moment (agent/process/guardian.h).
  // Throws std::runtime_error.
  explicit LogDir(const Config& config, Guardian* guardian = nullptr);
  ~LogDir();
  LogDir(const LogDir&) = delete;
  LogDir& operator=(const LogDir&) = delete;

  // False for --log-dir=/dev/null: no files at all.
  bool enabled() const { return !run_dir_.empty(); }
  const std::string& run_dir() const { return run_dir_; }

  // A failed job keeps its temporary directory: the failure summary names
  // error files in it.
  void keep() { remove_at_exit_.clear(); }
  // The temporary base directory removed at exit, or "".
  const std::string& removed_at_exit() const { return remove_at_exit_; }
  // Empties and recreates attempt_<n>/<rank>/ for every local rank, 0700.
  void prepare_attempt(int attempt, int nproc);
  // "" when disabled.
  std::string file(int attempt, int local_rank, const char* name) const;
  // attempt_<n>/<name>: the attempt's own files, not one rank's. "" when disabled.
  std::string attempt_file(int attempt, const char* name) const;

 private:
  std::string run_dir_;
  std::string remove_at_exit_;
};

}  // namespace cxxrun::agent
