// cxxrun-rdzv's command line: its options, their CXXRUN_RDZV_* variables,
// checks and help, in one CLI11 app. main.cc parses with it; the man page
// and the shell completions are generated from it (packaging/docgen.cc), so
// the three cannot drift. Only rdzv_cli.cc includes CLI11.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace CLI {
class App;
}

namespace cxxrun::store {

struct RdzvSettings {
  int port = -1;
  // Loopback unless asked: a store anyone on the network can write to is a
  // choice to make, not a default.
  std::string host = "127.0.0.1";
  size_t memory_limit_mib = 0;  // set from wire.h's default by make_rdzv_cli
  size_t max_value_bytes = 0;
  std::string token_file;
};

// The app, writing into `settings` (which must outlive it) when it parses.
std::unique_ptr<CLI::App> make_rdzv_cli(RdzvSettings& settings);
// "cxxrun-rdzv 0.1.0 (commit ...)".
std::string rdzv_version_text();

}  // namespace cxxrun::store
