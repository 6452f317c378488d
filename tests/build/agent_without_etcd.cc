// Must compile: the same target setup as etcd_from_agent.cc without etcd, so
// build.etcd_private's failure is etcd's privacy and not the setup's. It also
// shows that the agent's headers, the rendezvous seam's among them, need no
// etcd/ to compile.
#include "agent/agent.h"

int main() { return 0; }
