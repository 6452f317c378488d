// cxxrun: parse, then hand the job to the agent. Every failure ends as one
// line on stderr; the codes are agent/exit_codes.h's (usage errors 2, as
// argparse exits, anything else 1).
#include <iostream>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "agent/agent.h"
#include "agent/exit_codes.h"
#include "launcher/fanout.h"
#include "launcher/launcher_link.h"
#include "launcher/options.h"

namespace {

// The launcher has checked LOGLEVEL (launcher::Parsed::log_level).
spdlog::level::level_enum spdlog_level(const std::string& level) {
  if (level == "DEBUG") return spdlog::level::debug;
  if (level == "WARNING") return spdlog::level::warn;
  if (level == "ERROR") return spdlog::level::err;
  if (level == "CRITICAL") return spdlog::level::critical;
  return spdlog::level::info;
}

void setup_logging() {
  auto logger = spdlog::stderr_color_mt("cxxrun");
  logger->set_pattern("[%H:%M:%S.%e] [%n] %l: %v");
  logger->flush_on(spdlog::level::trace);
  spdlog::set_default_logger(logger);
}

// An agent a launcher started ends with its code on stdout
// (launcher/launcher_link.h), whatever ended it here.
bool told_launcher = false;

int to_launcher(int code) {
  if (told_launcher) cxxrun::launcher::say_exited(code);
  return code;
}

int run(int argc, char** argv) {
  namespace launcher = cxxrun::launcher;
  try {
    setup_logging();
    launcher::Parsed parsed = launcher::parse(std::vector<std::string>(argv + 1, argv + argc),
                                              launcher::current_environment());
    if (parsed.help) {
      std::cout << launcher::help_text();
      return 0;
    }
    if (parsed.version) {
      std::cout << launcher::version_text() << "\n";
      return 0;
    }
    // INFO by default: the agent's lifecycle lines (forwarded signals,
    // restarts) are what a user reads when a job misbehaves. The agent's
    // loggers are clones of this one.
    spdlog::default_logger()->set_level(spdlog_level(parsed.log_level));
    for (const std::string& note : parsed.notes) spdlog::info("{}", note);
    for (const std::string& warning : parsed.warnings) spdlog::warn("{}", warning);
    if (parsed.fanout) return launcher::run_fanout(*parsed.fanout);
    if (parsed.from_launcher) {
      launcher::LauncherLink link = launcher::take_launcher_stdin();
      if (!link.token.empty()) parsed.config.rdzv.settings.token = link.token;
      launcher::watch_launcher(std::move(link));
      told_launcher = true;
    }
    return cxxrun::agent::run(parsed.config);
  } catch (const launcher::UsageError& e) {
    std::cerr << "cxxrun: error: " << e.what() << std::endl;
    return cxxrun::agent::exit_code::usage;
  } catch (const std::exception& e) {
    std::cerr << "cxxrun: " << e.what() << std::endl;
    return cxxrun::agent::exit_code::internal_error;
  } catch (...) {
    std::cerr << "cxxrun: unexpected internal error" << std::endl;
    return cxxrun::agent::exit_code::internal_error;
  }
}

}  // namespace

int main(int argc, char** argv) { return to_launcher(run(argc, argv)); }
