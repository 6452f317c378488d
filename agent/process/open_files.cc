#include "agent/process/open_files.h"

namespace cxxrun::agent {
namespace {

// Set once, before any child; read by children between fork and exec.
rlimit g_inherited{RLIM_INFINITY, RLIM_INFINITY};
bool g_raised = false;

}  // namespace

rlim_t raise_open_files() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 0;
  g_inherited = limit;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &raised) == 0) {
      g_raised = true;
      return raised.rlim_cur;
    }
  }
  return limit.rlim_cur;
}

void restore_open_files() {
  if (g_raised) setrlimit(RLIMIT_NOFILE, &g_inherited);
}

rlim_t open_files_limit() {
  rlimit limit{};
  return getrlimit(RLIMIT_NOFILE, &limit) == 0 ? limit.rlim_cur : 0;
}

}  // namespace cxxrun::agent
