// Built by the include rules of tests/build/CMakeLists.txt, once per rule and
// target: ALLOWED_HEADER, which the target may include, comes first, so a
// failure that names FORBIDDEN_HEADER can only be the rule. Without
// FORBIDDEN_HEADER (the rule's control) it must build.
#include ALLOWED_HEADER
#ifdef FORBIDDEN_HEADER
#include FORBIDDEN_HEADER
#endif

int main() { return 0; }
