// Built once per wing of the agent (tests/build/CMakeLists.txt,
// build.wing_order.*), linked to that wing's library alone. OWN_HEADER, one
// of the wing's own headers, must be found: a failure that names ABOVE_HEADER,
// a header of the wing above it, can then only be the wing order.
#include OWN_HEADER
#include ABOVE_HEADER

int main() { return 0; }
