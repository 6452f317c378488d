// The event loop that runs one node's part of a job: it wires the worker
// group, the hang watchdog, the fault injector, the reporter and the
// rendezvous link on one Asio io_context, and after each attempt asks the
// restart policy what to do. Child exits (SIGCHLD), the agent's signals,
// output pipes and timers are handlers on that loop; nothing polls and
// nothing on it blocks on the network.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "agent/config.h"
#include "agent/progress/goodput.h"
#include "agent/workers/workers.h"

namespace boost::asio {
class io_context;
}

namespace cxxrun::rendezvous {
class Rendezvous;
struct Assignment;
}

namespace cxxrun::agent {

class Guardian;
class JobCgroup;
class NodeHealth;
class Postmortem;
class Forkserver;
class LogDir;

// Runs attempts until success, a final failure or a stop signal; returns the
// exit code (agent/exit_codes.h, chosen by agent/restart_policy.h). `config`
// is what the user asked for, and stays so; `first` is this node's place in
// the round rdzv.join() formed (the supervisor holds each round's, and hands
// it to the worker group); `job_token` is unique to this agent run;
// `cgroup` holds the job's processes (nullptr: none, agent/process/cgroup.h);
// `forkserver` forks Python workers warm where it can (nullptr: all start
// by exec, agent/warm/forkserver.h);
// `postmortem` gathers the kernel's evidence on ended workers
// (agent/forensics/postmortem.h); `health` checks the node before every restart
// (agent/health/node_health.h); `start`: when the agent started and joined,
// where its goodput counts from (agent/progress/goodput.h).
int supervise(const Config& config, const rendezvous::Assignment& first, LogDir& logs, Guardian& guardian,
              JobCgroup* cgroup, Forkserver* forkserver, Postmortem& postmortem, NodeHealth& health,
              rendezvous::Rendezvous& rdzv, const std::string& job_token, const AgentStart& start);

// The same loop over the workers `make_workers` gives it, made on the loop's
// io_context with the supervisor as their listener: the seam that lets
// tests/unit/agent/test_supervisor.cc drive the phase sequence (failure, restart,
// re-form, lost store, dead peer, signals) with no process. `guardian` may
// be null, and `health` (then no checks between rounds). `exit_now(code)` ends the process at once when a signal comes
// while the rendezvous blocks (production: std::_Exit); if it returns, the
// loop ends as for any exit.
using MakeWorkers = std::function<std::unique_ptr<Workers>(boost::asio::io_context& io, Workers::Listener& listener)>;
int supervise(const Config& config, const rendezvous::Assignment& first, LogDir& logs, Guardian* guardian,
              NodeHealth* health, rendezvous::Rendezvous& rdzv, const MakeWorkers& make_workers,
              const std::function<void(int)>& exit_now, const AgentStart& start = {});

}  // namespace cxxrun::agent
