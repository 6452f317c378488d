// Which rank stands apart in a hang: every rank's stack, taken at the
// verdict, grouped by where each one waits. Pure: the hang watchdog hands it
// the dumps (agent/stack_dump.h) and puts its line in the summary, the
// event log and /healthz.
//
// Where a rank waits is its main thread's innermost frame in the user's own
// code (not the interpreter's or a library's), with the library function it
// called from there: "all_reduce at w.py:61" for a rank inside
// torch.distributed.all_reduce called from line 61, "wedge at w.py:78" for
// one blocked inside its own function. Ranks that wait at the same place
// form a group; the culprit is the rank of the smallest group (the one that
// stands apart), the lowest rank among equals.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace cxxrun::agent {

struct Frame {
  std::string file;  // source file as the dump names it; "" when unknown (no debug info)
  int line = 0;
  std::string function;
  std::string module;  // native frames: the executable or library it is in
};

// The main thread's frames, innermost first, from one dump: Python's
// faulthandler text (all threads; the main thread is the last one it lists)
// or eu-stack's (the thread whose TID is the PID). Empty when the text holds
// no stack.
std::vector<Frame> main_thread_frames(const std::string& dump);

// Whether `file` (a source file or a module) is the interpreter's or a
// library's rather than the user's.
bool library_file(const std::string& file);
// A frame of a library: by its module when it has one, else its file.
bool library_frame(const Frame& f);

// "all_reduce at w.py:61", "wedge at w.py:78"; "" for no frames.
std::string where_it_waits(const std::vector<Frame>& frames);

struct HangPicture {
  // "ranks 0–2 wait in all_reduce at w.py:61; rank 3 waits in wedge at
  // w.py:78"; ranks without a stack are named as such.
  std::string line;
  std::optional<int> culprit;  // none when no rank has a stack
};

// `dumps`: global rank -> dump text ("" when none could be taken).
HangPicture picture(const std::map<int, std::string>& dumps);

// "0–2", "0, 2, 5", "3".
std::string rank_list(const std::vector<int>& ranks);

}  // namespace cxxrun::agent
