// The event loop that runs one node's part of a job: it wires the worker
// group, the hang watchdog, the fault injector, the reporter and the
// rendezvous link on one Asio io_context, and after each attempt asks the
// restart policy what to do. Child exits (SIGCHLD), the agent's signals,
// output pipes and timers are handlers on that loop; nothing polls and
// nothing on it blocks on the network.
#pragma once

#include <string>

#include "agent/config.h"

namespace cxxrun::rendezvous {
class Rendezvous;
struct Assignment;
}

namespace cxxrun::agent {

class Guardian;
class JobCgroup;
class Zygote;
class LogDir;

// Runs attempts until success, a final failure or a stop signal; returns the
// exit code (agent/exit_codes.h, chosen by agent/restart_policy.h). `config`
// is what the user asked for, and stays so; `first` is this node's place in
// the round rdzv.join() formed (the supervisor holds each round's, and hands
// it to the worker group); `job_token` is unique to this agent run;
// `cgroup` holds the job's processes (nullptr: none, agent/cgroup.h);
// `zygote` forks Python workers (nullptr: all start by exec, agent/zygote.h).
int supervise(const Config& config, const rendezvous::Assignment& first, LogDir& logs, Guardian& guardian,
              JobCgroup* cgroup, Zygote* zygote, rendezvous::Rendezvous& rdzv, const std::string& job_token);

}  // namespace cxxrun::agent
