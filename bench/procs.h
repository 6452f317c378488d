// What a load generator's agents need of processes: an open-file limit
// raised to the hard one, and --procs K, which spreads the agents over K
// processes, each with its own limit (10,000 agents' connections are more
// than one process may open here). Header-only, for the generators.
#pragma once

#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace bench_procs {

// Raises this process's open-file limit to its hard limit, and returns it
// (0 when it cannot be read): a generator holds a connection or more per
// agent.
inline rlim_t open_files_to_hard_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  limit.rlim_cur = limit.rlim_max;
  setrlimit(RLIMIT_NOFILE, &limit);
  return limit.rlim_cur;
}

// Runs run(first, last) for agents [0, nodes) cut into `procs` slices, each
// in a forked child (in this process when procs is 1), and waits for them
// all. A child that cannot be forked or does not exit 0 counts in
// `failures`. Fork before any thread of this process exists.
template <typename Run>
void in_processes(const char* program, int nodes, int procs, std::atomic<int>& failures, Run&& run) {
  std::vector<pid_t> children;
  for (int p = 0; p < procs; ++p) {
    const int first = static_cast<int>(static_cast<int64_t>(nodes) * p / procs);
    const int last = static_cast<int>(static_cast<int64_t>(nodes) * (p + 1) / procs);
    if (procs == 1) return run(first, last);
    const pid_t child = fork();
    if (child == 0) {
      run(first, last);
      fflush(stderr);
      _exit(0);
    }
    if (child < 0) {
      perror((std::string(program) + ": fork").c_str());
      ++failures;
      break;
    }
    children.push_back(child);
  }
  for (pid_t child : children) {
    int status = 0;
    if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) ++failures;
  }
}

}  // namespace bench_procs
