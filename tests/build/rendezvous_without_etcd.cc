// Must compile: the same target setup as etcd_from_rendezvous.cc without
// etcd. It also shows that the seam (rendezvous.h) and etcd's members in
// rendezvous's own terms (etcd_endpoints.h) need no etcd/ to compile.
#include "rendezvous/etcd_endpoints.h"
#include "rendezvous/rendezvous.h"

int main() { return 0; }
