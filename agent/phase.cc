#include "agent/phase.h"

namespace cxxrun::agent {

const char* phase_name(Phase p) {
  switch (p) {
    case Phase::running: return "running";
    case Phase::stopping: return "stopping";
    case Phase::restarting: return "restarting";
    case Phase::rendezvous: return "rendezvous";
    case Phase::barrier: return "barrier";
    case Phase::judging: return "judging";
    case Phase::reporting: return "reporting";
    case Phase::done: break;
  }
  return "done";
}

GroupState group_state(Phase p, bool paused, int exit_code) {
  switch (p) {
    case Phase::running: return paused ? GroupState::unhealthy : GroupState::healthy;
    case Phase::stopping:
    case Phase::restarting:
    case Phase::rendezvous:
    case Phase::judging:
    case Phase::reporting: return GroupState::stopped;
    case Phase::barrier: return GroupState::succeeded;
    case Phase::done: return exit_code == 0 ? GroupState::succeeded : GroupState::failed;
  }
  return GroupState::unknown;
}

}  // namespace cxxrun::agent
