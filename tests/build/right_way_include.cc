// Must compile: the same target setup as wrong_way_include.cc without the
// agent, so build.dependency_rule's failure is the rule's and not the setup's.
#include "worker_runtime/communicator.h"

int main() { return 0; }
