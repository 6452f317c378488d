// The load generators' command lines: "--name value" pairs, each value set
// into its field as it comes; an unknown name is one line on stderr
// ("store_load: unknown argument --x") and false, for an exit 2. What the
// values must be is each generator's own check, after this. Like
// wire_bytes.h, nothing of the project's, so a generator shares no code
// with what it measures.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <string>

namespace bench_args {

// Where one option's value goes.
struct Arg {
  const char* name;  // "--port"
  std::function<void(const char*)> set;
};

inline Arg arg(const char* name, std::string& to) {
  return {name, [&to](const char* v) { to = v; }};
}
inline Arg arg(const char* name, int& to) {
  return {name, [&to](const char* v) { to = atoi(v); }};
}
inline Arg arg(const char* name, double& to) {
  return {name, [&to](const char* v) { to = atof(v); }};
}
// "1" is true, anything else false.
inline Arg arg(const char* name, bool& to) {
  return {name, [&to](const char* v) { to = !strcmp(v, "1"); }};
}

// Reads argv[1..] as pairs; a last name without a value is ignored.
inline bool parse(const char* program, int argc, char** argv, std::initializer_list<Arg> args) {
  for (int i = 1; i + 1 < argc; i += 2) {
    const Arg* found = nullptr;
    for (const Arg& a : args)
      if (!strcmp(argv[i], a.name)) found = &a;
    if (found == nullptr) {
      fprintf(stderr, "%s: unknown argument %s\n", program, argv[i]);
      return false;
    }
    found->set(argv[i + 1]);
  }
  return true;
}

}  // namespace bench_args
