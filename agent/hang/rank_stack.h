// Every running rank's stack taken now, outside any verdict: what the hang
// watchdog hands whoever asks (HangWatchdog::stacks_now; cxxrunctl stacks,
// through agent/ctl_answers.h), so that the asker needs nothing else of the
// hang wing.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace cxxrun::agent {

struct RankStack {
  int rank = 0;      // global
  pid_t pid = 0;     // the worker's
  std::string text;  // faulthandler's or eu-stack's text; "" when none could be taken
};

// Called on the loop with every running rank's stack, ascending by rank.
using StacksDone = std::function<void(std::vector<RankStack>)>;

}  // namespace cxxrun::agent
