// Shared helpers for the launcher option tests.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "launcher/devices.h"
#include "listener.h"
#include "launcher/options.h"
#include "net/endpoint.h"

using namespace cxxrun::launcher;
using Catch::Contains;
using cxxrun::agent::Std;
namespace fs = std::filesystem;


namespace options_test {
// PATH from the real environment, and a master port nobody uses, so tests do
// not depend on (or collide with) a job that holds 29500.
inline Env base_env() {
  const char* path = std::getenv("PATH");
  return {{"PATH", path != nullptr ? path : "/usr/bin:/bin"},
          {"PET_MASTER_PORT", std::to_string(cxxrun::net::pick_free_port("127.0.0.1"))}};
}

inline Parsed run(std::vector<std::string> args, const Env& env = base_env()) { return parse(args, env); }

struct Failure {
  std::string message;
  bool not_built_yet = false;
};

inline Failure failure(std::vector<std::string> args, const Env& env = base_env()) {
  try {
    parse(args, env);
  } catch (const NotBuiltYet& e) {
    return {e.what(), true};
  } catch (const UsageError& e) {
    return {e.what(), false};
  }
  std::string line;
  for (const std::string& a : args) line += " " + a;
  FAIL("parse accepted a command line it should refuse:" << line);
  return {};
}

// A scratch directory with helpers to drop files into it.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "cxxrun_test_XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name, const std::string& bytes, mode_t mode) const {
    fs::path p = path / name;
    std::ofstream(p, std::ios::binary) << bytes;
    chmod(p.c_str(), mode);
    return p.string();
  }
};


inline const std::string kElf = std::string(
                             "\x7f"
                             "ELF\x02\x01\x01",
                             7) +
                         std::string(64, '\0');
inline const std::string kProg = "/bin/true";  // an ELF executable on every Debian

// The one-line message a refused command line (plus kProg) gets.
inline std::string refusal(std::vector<std::string> args, const Env& env = base_env()) {
  args.push_back(kProg);
  Failure f = failure(args, env);
  CHECK_FALSE(f.not_built_yet);
  CHECK(f.message.find('\n') == std::string::npos);
  return f.message;
}

// base_env() with one more variable.
inline Env with(std::string name, std::string value) {
  Env env = base_env();
  env[std::move(name)] = std::move(value);
  return env;
}

}  // namespace options_test

using namespace options_test;
