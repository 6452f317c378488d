// Must not compile: a worker program reaching into the agent. The allowed
// include comes first, so a failure that names agent/agent.h can only be the
// dependency rule (build.dependency_rule greps for exactly that).
#include "worker_runtime/communicator.h"
#include "agent/agent.h"

int main() { return 0; }
