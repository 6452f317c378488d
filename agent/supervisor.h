// The event loop that owns one node's worker group: child exits (SIGCHLD),
// the agent's signals, output pipes and the shutdown grace timer are all
// handlers on one Asio io_context; nothing polls.
#pragma once

#include <string>

#include "agent/config.h"

namespace cxxrun::agent {

class Guardian;
class LogDir;
class Meeting;

// Runs attempts until success, a final failure or a stop signal; returns the
// exit code described in agent.h. `job_token` is unique to this agent run.
// The loop also sends the meeting's keep-alives.
int supervise(const Config& config, LogDir& logs, Guardian& guardian, Meeting& meeting, const std::string& job_token);

}  // namespace cxxrun::agent
