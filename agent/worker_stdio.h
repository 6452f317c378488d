// A worker's standard output and error: the ends the worker writes and the
// ends the agent reads. Pipes by default; pseudo-terminals where the user
// wants workers to see a terminal (--tty). Whoever starts the worker (exec in
// agent/spawn.h, or the forkserver in agent/zygote.h) gets the write ends;
// the agent keeps the read ends.
#pragma once

namespace cxxrun::agent {

struct WorkerStdio {
  int out_read = -1;  // the agent's ends: close-on-exec, non-blocking
  int err_read = -1;
  int out_write = -1;  // the worker's ends: close-on-exec in the agent
  int err_write = -1;
};

// Throws std::runtime_error with the reason.
WorkerStdio open_worker_stdio();
// Once the worker has its copies (or could not be started).
void close_write_ends(WorkerStdio& s);
void close_all(WorkerStdio& s);

}  // namespace cxxrun::agent
