// A worker's standard output and error: the ends the worker writes and the
// ends the agent reads. Pipes by default; pseudo-terminals where the user
// wants workers to see a terminal (--tty). Whoever starts the worker (exec in
// agent/process/spawn.h, or the forkserver in agent/warm/zygote.h) gets the write ends;
// the agent keeps the read ends.
//
// A pty here only answers isatty() and the window size: the worker does not
// get it as its controlling terminal (it is a session leader of its own and
// never opens one), and its line discipline passes bytes unchanged, so the
// agent reads exactly what the worker wrote, as from a pipe.
#pragma once

#include "agent/config.h"

namespace cxxrun::agent {

struct WorkerStdio {
  int out_read = -1;  // the agent's ends: close-on-exec, non-blocking
  int err_read = -1;
  int out_write = -1;  // the worker's ends: close-on-exec in the agent
  int err_write = -1;
};

// A terminal's size in character cells; 0: unknown.
struct CellSize {
  unsigned short rows = 0;
  unsigned short cols = 0;
};

// What the agent's own stdout or stderr is.
struct Console {
  bool tty = false;
  CellSize size;  // where tty
};
Console console_of(int fd);

// How each of one worker's streams is made.
struct StdioRequest {
  bool out_tty = false;
  bool err_tty = false;
  CellSize out_size;  // given to the pty
  CellSize err_size;
};

// Whether local rank `local_rank`'s stream `which` is shown on the agent's
// console: not filtered out (--local-ranks-filter), and teed or not
// redirected.
bool shown_on_console(const Config& c, int local_rank, Std which);

// The --tty rule. never: pipes. always: two ptys. auto: a pty for each stream
// shown on a console (the agent's fd 1 for stdout, fd 2 for stderr) that is a
// terminal, which is what a worker of torchrun, inheriting those descriptors,
// would see. A pty shown on a terminal gets its size less the rank prefix's
// width, so a bar sized to fill the line still fits on one line with the
// prefix and its '\r' redraws stay on that line.
StdioRequest stdio_request(const Config& c, int local_rank, int rank, const Console& out, const Console& err);
// The same for the agent's own fds 1 and 2.
StdioRequest stdio_request(const Config& c, int local_rank, int rank);

// Throws std::runtime_error with the reason.
WorkerStdio open_worker_stdio(const StdioRequest& request = {});
// Once the worker has its copies (or could not be started).
void close_write_ends(WorkerStdio& s);
void close_all(WorkerStdio& s);

}  // namespace cxxrun::agent
