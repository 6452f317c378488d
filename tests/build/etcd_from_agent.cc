// Must not compile: the agent reaching into etcd, which is private to
// rendezvous/ (rendezvous/CMakeLists.txt links it PRIVATE). The agent's own
// header comes first, so a failure that names etcd/client.h can only be
// etcd's privacy (build.etcd_private greps for exactly that).
#include "agent/agent.h"
#include "etcd/client.h"

int main() { return 0; }
