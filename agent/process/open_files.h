// How many descriptors the agent may hold. It serves stores that hold one
// per connection: the rendezvous store as c10d's host, and the workers'
// store (TORCHELASTIC_USE_AGENT_STORE), to which every rank of the job
// connects at init_process_group. The soft RLIMIT_NOFILE most systems start
// a process with (1024) would stop that store at about a thousand
// connections, with every later rank waiting at init_process_group
// (bench/storm.py found it). So the agent raises its soft limit to the hard
// one once, at start, as cxxrun-rdzv does; what it starts gets the soft limit
// it was started with back, so a program sees the limit it would have under
// torchrun.
#pragma once

#include <sys/resource.h>

namespace cxxrun::agent {

// At start, before any thread or child. Returns the soft limit it got.
rlim_t raise_open_files();
// In a child between fork and exec (async-signal-safe): the soft limit the
// agent was started with.
void restore_open_files();
// The agent's soft limit now: about how many connections its stores can
// hold together.
rlim_t open_files_limit();

}  // namespace cxxrun::agent
