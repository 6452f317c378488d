// cxxrun-rdzv: a standalone TCPStore server, for a rendezvous endpoint that
// should outlive any one agent. Usage errors (an unreadable or empty token
// file included) exit 2 with one line; a port that cannot be bound exits 1
// with one line; SIGINT/SIGTERM exit 0. Every option can also come from a
// CXXRUN_RDZV_* variable (a flag wins), so a service manager's environment
// file configures it (packaging/cxxrun-rdzv.service).
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "store/auth.h"
#include "store/server.h"
#include "store/rdzv_cli.h"

namespace {

// "<6>" for info: the syslog priority journald reads off the start of each
// line of a service's stderr (sd-daemon(3)).
class JournalPriority : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
    static constexpr const char* kPriority[] = {"<7>", "<7>", "<6>", "<4>", "<3>", "<2>", "<6>"};
    const char* p = kPriority[static_cast<int>(msg.level)];
    dest.append(p, p + 3);
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<JournalPriority>(); }
};

void setup_logging() {
  auto logger = spdlog::stderr_color_mt("cxxrun-rdzv");
  if (getenv("JOURNAL_STREAM") != nullptr) {
    // Started by systemd with stderr on the journal: journald stamps each
    // line with the time and the unit, and takes the priority from it.
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<JournalPriority>('*').set_pattern("%*%v");
    logger->set_formatter(std::move(formatter));
  } else {
    logger->set_pattern("[%H:%M:%S.%e] [%n] %l: %v");
  }
  logger->set_level(spdlog::level::info);
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

// Each client is a socket; the usual soft limit of 1024 would cap a store
// meant for thousands of agents and workers well below what the host allows.
void raise_fd_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

}  // namespace

int main(int argc, char** argv) {
  cxxrun::store::RdzvSettings settings;
  auto app = cxxrun::store::make_rdzv_cli(settings);
  try {
    app->parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app->exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app->exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "cxxrun-rdzv: error: " << e.what() << std::endl;
    return 2;
  }
  if (const char* credentials = getenv("CREDENTIALS_DIRECTORY"); settings.token_file.empty() && credentials != nullptr) {
    // Run as a service with LoadCredential=token:PATH: systemd hands the
    // secret over in a directory only this service can read.
    const std::string path = std::string(credentials) + "/token";
    if (access(path.c_str(), F_OK) == 0) settings.token_file = path;
  }
  std::string token;
  const std::string& token_file = settings.token_file;
  if (!token_file.empty()) {
    try {
      token = cxxrun::store::auth::read_token_file(token_file);
    } catch (const std::exception& e) {
      std::cerr << "cxxrun-rdzv: error: --token-file: " << e.what() << std::endl;
      return 2;
    }
  }

  try {
    setup_logging();
    raise_fd_limit();
    // Blocked before the server thread starts, so that thread inherits the
    // mask and the signals are left for sigwait below.
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

    cxxrun::store::StoreServerOptions options;
    options.host = settings.host;
    options.port = settings.port;
    options.memory_limit = settings.memory_limit_mib << 20;
    options.max_value_bytes = settings.max_value_bytes;
    options.token = token;
    cxxrun::store::BackgroundStoreServer server(options);
    spdlog::info("listening on {}", server.address());
    if (!token.empty())
      spdlog::info("every client must prove it knows the token in {}", token_file);
    else if (!server.loopback_only())
      spdlog::warn("no token on a store that listens beyond loopback: anyone who can reach {} can read and "
                   "change it (--token-file PATH sets a shared secret)",
                   server.address());
    // No deadline on purpose: serving until told to stop is the whole job.
    int received = 0;
    sigwait(&stop_signals, &received);
    spdlog::info("received {}, stopping", received == SIGINT ? "SIGINT" : "SIGTERM");
    server.stop();
    spdlog::info("stopped: every connection closed");
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "cxxrun-rdzv: " << e.what() << std::endl;
    return 1;
  }
}
