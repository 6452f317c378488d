// What the agent is told to run. The launcher builds this from argv and the
// environment; the agent never sees argv. All values are already validated.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/numa/placement.h"
#include "rendezvous/rendezvous.h"
#include "store/wire.h"

namespace cxxrun::agent {

// The grace between SIGTERM and SIGKILL when workers stop (torchrun's, and
// TORCH_ELASTIC_SHUTDOWN_TIMEOUT's default).
inline constexpr std::chrono::seconds kDefaultShutdownTimeout{30};
// How long a worker may outlive cxxrun's SIGKILL before the agent gives up
// on it as unkillable (uninterruptible sleep: a hung NFS read, a wedged
// driver), reports it and exits with exit_code::unkillable. A SIGKILLed
// process normally goes within milliseconds; one that needs its memory
// freed first, seconds.
inline constexpr std::chrono::seconds kDefaultKillTimeout{10};

// torchrun's Std flag: which of a worker's streams go to a file.
enum class Std : unsigned { none = 0, out = 1, err = 2, all = 3 };

inline bool has(Std set, Std bit) {
  return (static_cast<unsigned>(set) & static_cast<unsigned>(bit)) != 0;
}

// --tty: which worker streams are pseudo-terminals rather than pipes; the
// rule per stream is in agent/workers/worker_stdio.h (stdio_request).
enum class Tty { auto_, always, never };

// "--redirects 3" (all ranks) or "--redirects 0:1,2:3" (per local rank; the
// ranks not named get none).
struct StdSpec {
  Std all = Std::none;
  std::map<int, Std> per_rank;
  bool per_rank_given = false;

  Std for_rank(int local_rank) const {
    if (!per_rank_given) return all;
    auto it = per_rank.find(local_rank);
    return it == per_rank.end() ? Std::none : it->second;
  }
};

// Deterministic fault injection for tests (--inject-fault, repeatable, or
// CXXRUN_INJECT_FAULTS="spec;spec"). Specs:
//   kill:rank=R,after=MS[,signal=SIGKILL][,attempt=A]  signal global rank R
//   stop:rank=R,after=MS[,attempt=A]                   SIGSTOP it (a hang)
//   drop_store:node=N,after=MS                         node N's agent loses the store
//   delay_store:node=N,ms=MS                           each store call of node N's agent waits MS first
struct FaultSpec {
  enum class Kind { kill, stop, drop_store, delay_store };
  Kind kind = Kind::kill;
  int rank = -1;  // kill/stop: global rank
  int node = -1;  // store faults: group rank
  std::chrono::milliseconds after{0};
  std::chrono::milliseconds delay{0};
  int signal = 9;
  int attempt = 0;  // kill/stop: only in this attempt (TORCHELASTIC_RESTART_COUNT)
};

// How long --health-check's command may take before it counts as failed.
inline constexpr std::chrono::seconds kDefaultHealthCheckTimeout{60};

// --health-path=PATH[:MIN_FREE]: a path this node must be able to write,
// with at least min_free bytes free on its file system.
struct HealthPath {
  std::string path;
  unsigned long long min_free = 0;
};

// What a node checks before every round (agent/health/node_health.h). The GPU and
// RDMA checks need no option: they run where the host has GPUs (NVML loads)
// or RDMA ports.
struct HealthChecks {
  std::string command;  // --health-check: exit 0 is healthy, its first line the reason
  std::chrono::milliseconds command_timeout{kDefaultHealthCheckTimeout};
  std::vector<HealthPath> paths;
  // --exclude-file: a node that steps out appends its name here, one per line.
  std::string exclude_file;
  // --max-node-failures: a node whose own workers were the first to fail
  // this many times in the job steps out at the next restart (0: never).
  int max_node_failures = 0;
};

// Warm Python workers, forked from a zygote (agent/warm/forkserver.h).
struct ForkserverOptions {
  std::string python;  // "": every worker starts by exec
  std::vector<std::string> preload;  // modules imported once, before any fork
  bool preload_given = false;  // --preload: a module that fails to import is reported
  // The default for a Python program (no --start-method): where `script`
  // imports torch at its top level the zygote starts at once, as under
  // forkserver; otherwise the first attempt starts by exec and the zygote
  // starts once the workers show what they import (agent/warm/forkserver.h).
  // false: --start-method=forkserver, the zygote starts at once.
  bool learn = false;
  std::string script;  // the source file run as __main__; "" for -m
};

// --restart-policy, as agent/verdict/judge.h reads it and decides with it.
struct RestartRule {
  bool always = false;  // torchrun's blind restarts: nothing is judged
  int same_cause = 3;   // attempts in a row with one root cause and no progress
  int oom = 2;          // the same, for an OOM kill
};

// --straggler-action (agent/straggler/straggler_watch.h, docs/stragglers.md):
// what a node does about a rank or node slower than its peers.
enum class StragglerAction {
  report,   // one log line, the STRAGGLER event, the /metrics gauges
  replace,  // the same, and a slow node steps out for a waiting spare
  off,      // nothing is sampled
};

struct Config {
  // Worker argv; each element may hold the "${local_rank}" macro.
  std::vector<std::string> command;
  // Name shown in the failure summary (script path or binary).
  std::string entrypoint_name;

  int nproc_per_node = 1;
  int max_restarts = 0;
  std::string run_id = "none";
  std::string role = "default";

  rendezvous::RendezvousConfig rdzv;

  // This node's place in the job: set by the launcher for Backend::local,
  // filled in by the rendezvous otherwise.
  int group_rank = 0;
  int group_world_size = 1;
  int base_rank = 0;    // RANK of local rank 0
  int world_size = 0;   // 0: nproc_per_node * group_world_size

  // The workers' store as the launcher planned it; the rendezvous settles
  // the final MASTER_ADDR/MASTER_PORT (rule: rendezvous/worker_store.h).
  // master_port 0: a free port, chosen then.
  std::string master_addr = "127.0.0.1";
  int master_port = store::wire::kDefaultPort;
  bool use_agent_store = false;
  // What named master_port ("--master-port=29500", "PET_MASTER_PORT=..."):
  // a port the user chose, taken by the time the agent binds it, is bad
  // input (exit 2) named by this. "": cxxrun chose the port.
  std::string master_port_origin;

  // --virtual-local-rank: every worker gets LOCAL_RANK=0 and, in
  // CUDA_VISIBLE_DEVICES, the one device of its local rank
  // (visible_devices[local_rank], already mapped through the agent's own
  // CUDA_VISIBLE_DEVICES). ${local_rank} in arguments, prefixes and log
  // paths stays the real local rank. Empty: off.
  std::vector<std::string> visible_devices;

  // Base log directory. Empty: a fresh temp dir, removed at exit.
  // "/dev/null": no log files and no error files.
  std::string log_dir;
  StdSpec redirects;
  StdSpec tee;
  // Local ranks whose console output is shown; empty = all.
  std::set<int> local_ranks_filter;
  // TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE; empty = "[${role_name}${local_rank}]:".
  std::string log_line_prefix_template;
  // --duplicate-stdout-filters / --duplicate-stderr-filters: lines of tee'd
  // streams that contain any of these also go, prefixed, to
  // filtered_stdout.log / filtered_stderr.log in the attempt's directory.
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  Tty tty = Tty::auto_;

  // Containment (agent/process/cgroup.h): the job's processes in a cgroup of their
  // own where cgroup v2 is writable; false (CXXRUN_CONTAINMENT=subreaper):
  // only the agent's child subreaper and the environment token find them.
  bool use_cgroup = true;

  // Signals forwarded to every worker's process group; each one also ends
  // the job (the workers get it, then SIGKILL after the shutdown grace), as
  // in torch, except those in forward_only: what cxxrun added itself
  // (SIGUSR1 inside a Slurm step), which only reach the workers.
  std::vector<int> signals_to_handle;
  std::set<int> forward_only_signals;
  // Grace between SIGTERM and SIGKILL when stopping workers; 0: SIGKILL at once.
  std::chrono::milliseconds shutdown_timeout{kDefaultShutdownTimeout};
  // --kill-timeout: bound on the wait after SIGKILL (kDefaultKillTimeout).
  std::chrono::milliseconds kill_timeout{kDefaultKillTimeout};

  // Set in every worker's environment on top of the agent's own.
  std::map<std::string, std::string> extra_env;

  // Observability. --event-log FILE: one JSON event per line ("" = off).
  // --event-log-handler=console: the same lines on stderr as well.
  std::string event_log;
  bool event_log_console = false;
  // --health-port P (or TORCHELASTIC_HEALTH_CHECK_PORT): HTTP /healthz and
  // /metrics; -1 = off, 0 = any free port (logged). health_host "" = all
  // interfaces; loopback unless --health-host says otherwise.
  int health_port = -1;
  std::string health_host = "127.0.0.1";

  // Hang detection. --heartbeat-timeout SECONDS: a worker that has beaten
  // once (worker_runtime/heartbeat.h) and then stays silent this long is
  // hung; 0 = off. --section-timeout NAME=SECONDS (repeatable) bounds named
  // sections. --stack-dump-signal SIG is sent before the kill so the worker
  // can print its stacks (0 = none).
  std::chrono::milliseconds heartbeat_timeout{0};
  std::map<std::string, std::chrono::milliseconds> section_timeouts;
  int stack_dump_signal = 0;
  // --hang-timeout: no worker of this node made progress (CPU, output,
  // heartbeats) for this long (agent/hang/progress_monitor.h); 0 = off.
  std::chrono::milliseconds hang_timeout{0};
  // Progress tracked per attempt (agent/progress/progress_tracker.h).
  // --progress-pattern REGEX: a worker output line matching it is progress,
  // its first capture group the step ("" = off; the launcher checked it).
  // --checkpoint-dir DIR: a new entry there is a checkpoint (absolute; ""
  // = off; it need not exist).
  std::string progress_pattern;
  std::string checkpoint_dir;
  // --restart-policy: whether a failure that repeats without progress
  // stops the job before --max-restarts is spent (agent/verdict/judge.h).
  RestartRule restart_rule;
  StragglerAction straggler_action = StragglerAction::report;
  // torchrun's file-timer watchdog: TORCHELASTIC_ENABLE_FILE_TIMER=1, FIFO at
  // TORCHELASTIC_TIMER_FILE ("" = a fresh path).
  bool file_timer = false;
  std::string file_timer_path;

  std::vector<FaultSpec> faults;

  HealthChecks health;

  ForkserverOptions forkserver;

  // --numa-binding: where each local rank runs, taken before its program
  // starts (agent/numa/binding.h); one entry per local rank, empty: no binding.
  std::vector<NumaPlacement> numa_binding;
};

}  // namespace cxxrun::agent
