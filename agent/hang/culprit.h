// Whom a hang is blamed on: every rank's stack, taken at the verdict,
// grouped by where each one waits, and the workers cxxrun knows are stopped.
// Pure: the hang watchdog hands it the dumps (agent/hang/stack_dump.h) and what
// its judges said in one tick, and acts on the answer (docs/hangs.md, "Whom
// a verdict blames").
//
// Where a rank waits is its main thread's innermost frame in the user's own
// code (not the interpreter's or a library's), with the library function it
// called from there: "all_reduce at w.py:61" for a rank inside
// torch.distributed.all_reduce called from line 61, "wedge at w.py:78" for
// one blocked inside its own function. Ranks that wait at the same place
// form a group, and a rank may stand apart from the others
// (common/stack_groups.h says when).
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/stack_groups.h"

namespace cxxrun::agent {

struct Frame {
  std::string file;  // source file as the dump names it; "" when unknown (no debug info)
  int line = 0;
  std::string function;  // as the dump prints it: a demangled C++ name whole ("f(char const*, int) const")
  std::string module;    // native frames: the executable or library it is in
};

// The main thread's frames, innermost first, from one dump: Python's
// faulthandler text (all threads; the main thread is the last one it lists)
// or eu-stack's (the thread whose TID is the PID). Empty when the text holds
// no stack.
std::vector<Frame> main_thread_frames(const std::string& dump);

// One frame line of `eu-stack -m -s` (with or without -a's "- 1" marks):
//   "#2  0x000055faf061215b run_worker(char const*, int) - /tmp/train"
//   "#3  0x00007f2f328d44a3 - /usr/lib/x86_64-linux-gnu/libstdc++.so.6"   (no symbol)
// The function is everything between the address and the last " - " (a
// demangled name holds spaces, "(anonymous namespace)", "operator<<",
// "[clone .cold]"), less a symbol version ("@GLIBC_2.2.5"); the module is
// what follows. nullopt for a line that is not a frame.
std::optional<Frame> eu_stack_frame(const std::string& line);

// A frame of a library (agent/forensics/library_file.h decides for a file):
// by its module when it has one, else its file; a
// frame of the user's binary whose source is a system header (an inlined
// std:: template) is the library's too.
bool library_frame(const Frame& f);

// "all_reduce at w.py:61", "wedge at w.py:78"; "" for no frames. A C++
// function is shown without its parameters ("gloo::...::waitRecv at
// gloo_communicator.cc:154"), one without a symbol by its module
// ("libgloo.so.0.5.0 at gloo_communicator.cc:154"); without debug info the
// user's frame is its function in its module ("__pthread_mutex_lock at
// (anonymous namespace)::wedge in train"), or the module alone when stripped.
std::string where_it_waits(const std::vector<Frame>& frames);

// Where every rank waits, grouped (common/stack_groups.h: the one home of
// the grouping and its line, which cxxrunctl stacks prints too).
using HangPicture = stacks::Groups;
using stacks::rank_list;  // "0–2", "0, 2, 5", "3"

HangPicture picture(const std::map<int, std::string>& dumps);

// A rank one of the heartbeat, section or file-timer judges named in this
// tick, and how far past its limit it was.
struct Accused {
  int rank = 0;
  std::chrono::nanoseconds overdue{0};
};

// A running worker a signal stopped (SIGSTOP, SIGTSTP...): `since` is the
// wall-clock time it was seen stopped, as the log prints it. Earliest first.
struct StoppedRank {
  int rank = 0;
  std::string since;
};

struct Blame {
  int rank = -1;  // the rank to kill; -1 when none runs
  // Why, in the words of the failure: "rank 3 stands apart", "rank 2 was
  // stopped by a signal at 12:00:01 and never continued: every other rank
  // waits for it", "no rank stands apart; rank 0 was killed only to stop the
  // job, not as its cause".
  std::string reason;
  // Whether the rank is blamed as the hang's cause (stopped, standing apart,
  // or the one rank a judge named while no other rank waits where it waits).
  // False when no rank stands apart and it is killed only to stop the job
  // (3 with several named or with a peer at its place, and 4): then no root
  // cause can be named, and the summary says so (agent/forensics/failure.h).
  bool cause = true;
};

// Whom one tick's verdicts blame and kill, in this order:
//  1. a worker a signal stopped: the others wait for it (the earliest
//     stopped when several are);
//  2. the rank that stands apart;
//  3. none stands apart: the rank a judge named (the most overdue when it
//     named several; lowest rank among equals), named as the one past its
//     limit, not as the cause of the others' wait;
//  4. none named (--hang-timeout): the lowest running rank, killed only to
//     stop the job.
// With one running rank there is no peer to compare: 3 and 4 add no reason.
// `running`: the ranks still running, ascending.
Blame blame(const HangPicture& p, const std::vector<Accused>& named, const std::vector<StoppedRank>& stopped,
            const std::vector<int>& running);

}  // namespace cxxrun::agent
