// Must not compile: a program that links only cxxrun_rendezvous reaching
// into etcd, which rendezvous/ links PRIVATE. The rendezvous headers come
// first, so a failure that names etcd/client.h can only be etcd's privacy
// (build.etcd_private_rendezvous greps for exactly that).
#include "rendezvous/etcd_endpoints.h"
#include "rendezvous/rendezvous.h"
#include "etcd/client.h"

int main() { return 0; }
