#include "store/rdzv_cli.h"

#include <CLI/CLI.hpp>

#include "cxxrun_commit.h"
#include "store/wire.h"

namespace cxxrun::store {

std::string rdzv_version_text() {
  return std::string("cxxrun-rdzv ") + CXXRUN_VERSION + " (commit " + CXXRUN_COMMIT + ")";
}

std::unique_ptr<CLI::App> make_rdzv_cli(RdzvSettings& s) {
  auto app = std::make_unique<CLI::App>("A TCPStore-compatible key-value server for torch and cxxrun rendezvous.",
                                        "cxxrun-rdzv");
  s.memory_limit_mib = wire::kDefaultMemoryLimit >> 20;
  s.max_value_bytes = wire::kMaxValueBytes;
  app->set_version_flag("--version", rdzv_version_text(),
                        "show cxxrun-rdzv's version and the commit it was built from, and exit");
  app->add_option("--port", s.port, "port to listen on; 0 picks a free one")
      ->required()
      ->envname("CXXRUN_RDZV_PORT")
      ->check(CLI::Range(0, 65535));
  app->add_option("--host", s.host,
                  "address or name to listen on (default: 127.0.0.1; 0.0.0.0 or :: for every interface)")
      ->envname("CXXRUN_RDZV_HOST");
  app->add_option("--memory-limit", s.memory_limit_mib,
                  "MiB that all connections together may hold in unfinished requests and unsent replies; "
                  "past it the connection holding the most is closed (default 256)")
      ->envname("CXXRUN_RDZV_MEMORY_LIMIT")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24));
  app->add_option("--max-value-bytes", s.max_value_bytes,
                  "longest value a request may carry, in bytes (default 8388608, torch's limit)")
      ->envname("CXXRUN_RDZV_MAX_VALUE_BYTES")
      ->check(CLI::Range(size_t{1}, wire::kMaxRequestBytes));
  app->add_option("--token-file", s.token_file,
                  "a file holding a shared secret that every client must prove it knows before any request "
                  "(agents: --rdzv-conf token_file=PATH); torch's own clients cannot, and are refused")
      ->envname("CXXRUN_RDZV_TOKEN_FILE");
  return app;
}

}  // namespace cxxrun::store
