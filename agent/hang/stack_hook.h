// Whether a process's Python hook (agent/python/hook.h) can still dump its
// stack when cxxrun sends the stack signal, read from the stacks file it
// registered in and from /proc. A process is signalled only when all hold:
// it is the very process that registered (same pid and start time: a pid
// recycled for an unrelated process is never signalled), it is the worker
// or in the worker's tree, its registered descriptor is still the stacks
// file (a program that closed it and opened its own data file in its place
// would get the dump), the hook did not report the signal taken over by the
// program, and the signal is caught and neither ignored nor blocked (a
// handler reset to the default would make the dump kill it). Otherwise the
// stack is read from outside (agent/hang/stack_dump.h).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace cxxrun::agent {

// What the hook wrote at registration, two lines:
//   cxxrun: stack dump on signal 37 for pid 42
//   cxxrun: pid 42 started at 123456 dumps to fd 517
// and, when the program sets its own handler for the signal later:
//   cxxrun: stack dump off for pid 42 (...)
struct HookRegistration {
  pid_t pid = 0;
  int signal = 0;
  int fd = -1;                   // -1: not told
  unsigned long long start = 0;  // /proc/<pid>/stat's starttime; 0: not told
  bool off = false;
};

// Registrations in `text` (a stacks file's), first first.
std::vector<HookRegistration> hook_registrations(const std::string& text);

// "" when cxxrun may send r.signal to r.pid for worker `worker` whose hook
// writes to `stacks_file`; else why not, in words ("pid 42 is no longer the
// process that registered (started at 1, now 2)").
std::string why_not_signal(const HookRegistration& r, pid_t worker, const std::string& stacks_file);

}  // namespace cxxrun::agent
