#include "agent/agent.h"

#include <signal.h>
#include <sys/prctl.h>

#include <random>
#include <spdlog/spdlog.h>

#include "agent/guardian.h"
#include "agent/log_dir.h"
#include "agent/meeting.h"
#include "agent/supervisor.h"
#include "rendezvous/c10d_rendezvous.h"

namespace cxxrun::agent {
namespace {

std::string random_token() {
  std::random_device rd;
  char buf[33];
  snprintf(buf, sizeof buf, "%08x%08x%08x%08x", rd(), rd(), rd(), rd());
  return buf;
}

}  // namespace

int run(const Config& input) {
  Config config = input;
  // Console writes must fail with EPIPE rather than kill the agent.
  signal(SIGPIPE, SIG_IGN);
  // Orphaned grandchildren are reparented to us, so they can be found and
  // reaped instead of escaping to init.
  if (prctl(PR_SET_CHILD_SUBREAPER, 1) != 0) spdlog::warn("cannot become a child subreaper");
  const std::string token = random_token();
  LogDir logs(config);
  Guardian guardian("CXXRUN_JOB_TOKEN=" + token + ":", logs.removed_at_exit());
  Meeting meeting(config);
  try {
    meeting.join(config);
  } catch (const rendezvous::RendezvousClosed& e) {
    spdlog::info("{}; exiting", e.what());
    return 0;
  }
  const int code = supervise(config, logs, guardian, meeting, token);
  if (code != 0) logs.keep();
  meeting.close(code == 0);
  return code;
}

}  // namespace cxxrun::agent
