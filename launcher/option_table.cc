#include "launcher/option_table.h"

#include <algorithm>
#include <cctype>

#include "agent/config.h"
#include "launcher/fanout_plan.h"
#include "launcher/static_text.h"
#include "rendezvous/rendezvous.h"
#include "store/wire.h"

namespace cxxrun::launcher {
namespace {

using enum EnvFallback;
using enum Group;

// Help texts follow torch/distributed/run.py, shortened to one line each.
constexpr OptionSpec kOptions[] = {
    {"-h,--help", "", nullptr, none, general, "show this help message and exit"},

    {"--nnodes", "NNODES", "1:1", value, workers,
     "Number of nodes N, or <minimum_nodes>:<maximum_nodes> for c10d (static needs a fixed N)."},
    {"--nproc-per-node,--nproc_per_node", "NPROC_PER_NODE", "1", value, workers,
     "Number of workers per node; supported values: [auto, cpu, gpu, int]."},

    {"--rdzv-backend,--rdzv_backend", "RDZV_BACKEND", "static", value, rendezvous,
     "Rendezvous backend: static (fixed nodes, --node-rank), c10d (nodes meet at "
     "--rdzv-endpoint and get their ranks there), or etcd-v3 (etcd, etcd-v2: the same through "
     "the etcd members in --rdzv-endpoint)."},
    {"--rdzv-endpoint,--rdzv_endpoint", "RDZV_ENDPOINT", "", value, rendezvous,
     static_text::text<"Rendezvous backend endpoint <host>[:<port>]; c10d: required, port ",
                       static_text::decimal<rendezvous::kDefaultC10dPort>(),
                       " by default; static: replaces --master-addr/--master-port.">},
    {"--rdzv-id,--rdzv_id", "RDZV_ID", "none", value, rendezvous, "User-defined group id."},
    {"--rdzv-conf,--rdzv_conf", "RDZV_CONF", "", value, rendezvous,
     "Additional rendezvous configuration (<key1>=<value1>,...): join_timeout, "
     "last_call_timeout, close_timeout, keep_alive_interval, keep_alive_max_attempt, "
     "read_timeout, heartbeat_timeout, timeout (static), is_host, store_type=tcp, token_file; "
     "etcd: protocol, cacert, cert, key, etcd_prefix."},
    {"--standalone", "", nullptr, flag, rendezvous,
     "Single-node job on a free local port with a fresh run id; --rdzv-backend, "
     "--rdzv-endpoint and --rdzv-id are ignored."},

    {"--max-restarts,--max_restarts", "MAX_RESTARTS", "0", value, launch,
     "Maximum number of worker group restarts before failing."},
    {"--monitor-interval,--monitor_interval", "MONITOR_INTERVAL", "0.1", value, launch,
     "Accepted for compatibility (seconds, > 0); cxxrun reacts to worker exits at once."},
    {"--start-method,--start_method", "{spawn,fork,forkserver}", "spawn", value, launch,
     "Not given: a Python script that imports torch at its top level forks every worker, the first "
     "attempt's too, from one interpreter that imported torch once for the node; any other Python "
     "program's first attempt starts as spawn, and its restarts fork warm workers from an interpreter "
     "that imported what the first attempt's workers did. "
     "forkserver: fork every Python worker from one interpreter that imported --preload once; "
     "spawn and fork start each by exec."},
    {"--event-log-handler,--event_log_handler", "EVENT_LOG_HANDLER", "null", value, launch,
     "Where agent events go: null (nowhere), console (one JSON line each on stderr) or "
     "dynamic_rendezvous (nowhere, as torch's); see also --event-log FILE."},
    {"--role", "ROLE", "default", value, launch, "User-defined role for the workers."},
    {"-m,--module", "", nullptr, flag, launch,
     "Interpret the training script as a Python module, as 'python -m' does."},
    {"--no-python,--no_python", "", nullptr, flag, launch,
     "Execute the training program directly instead of through python."},
    {"--run-path,--run_path", "", nullptr, flag, launch,
     "Run the training script with runpy.run_path; takes precedence over --no-python."},
    {"--signals-to-handle,--signals_to_handle", "SIGNALS_TO_HANDLE",
     "SIGTERM,SIGINT,SIGHUP,SIGQUIT", value, launch,
     "Comma-separated signals forwarded to the workers (e.g. add SIGUSR1,SIGUSR2 for SLURM)."},
    {"--shutdown-timeout,--shutdown_timeout", "SECONDS", nullptr, value, launch,
     static_text::text<"Grace between SIGTERM and SIGKILL when stopping workers; 0: SIGKILL at once "
                       "(default $TORCH_ELASTIC_SHUTDOWN_TIMEOUT or ",
                       static_text::decimal<agent::kDefaultShutdownTimeout.count()>(), ").">},
    {"--virtual-local-rank,--virtual_local_rank", "", nullptr, flag, launch,
     "Every worker sees LOCAL_RANK=0 and only its own GPU (CUDA_VISIBLE_DEVICES holds one device, "
     "taken from the agent's CUDA_VISIBLE_DEVICES when set)."},
    {"--numa-binding,--numa_binding", "{node,socket,exclusive,core-complex}", nullptr, none, launch,
     "Bind each worker near its GPU (local rank L: GPU L, found by hwloc): node = the NUMA node's "
     "CPUs and memory; socket = its package's CPUs; exclusive = a share of the node's cores; "
     "core-complex = the CPUs of one last-level cache."},

    {"--log-dir,--log_dir", "LOG_DIR", nullptr, value, logging,
     "Base directory for log files; a fresh temporary one when not given, /dev/null for none."},
    {"-r,--redirects", "REDIRECTS", "0", value, logging,
     "Redirect std streams into log files (e.g. -r 3 for all workers, -r 0:1,1:2 per local rank)."},
    {"-t,--tee", "TEE", "0", value, logging,
     "Tee std streams into log files and the console (see --redirects for the format)."},
    {"--local-ranks-filter,--local_ranks_filter", "LOCAL_RANKS_FILTER", "", value, logging,
     "Only show these local ranks' output on the console (e.g. --local-ranks-filter=0,1,2)."},
    {"--duplicate-stdout-filters,--duplicate_stdout_filters", "FILTERS", "", value, logging,
     "Also write the tee'd ranks' stdout lines that contain any of these comma-separated strings "
     "to filtered_stdout.log in the attempt's log directory (',,' is a literal comma)."},
    {"--duplicate-stderr-filters,--duplicate_stderr_filters", "FILTERS", "", value, logging,
     "The same for stderr, into filtered_stderr.log."},
    {"--logs-specs,--logs_specs", "LOGS_SPECS", nullptr, none, logging,
     "torchrun.logs_specs entry point name (a Python plugin; not supported)."},

    {"--node-rank,--node_rank", "NODE_RANK", "0", value, static_rdzv,
     "Rank of this node, 0..NNODES-1 (static backend only; c10d assigns ranks)."},
    {"--master-addr,--master_addr", "MASTER_ADDR", "127.0.0.1", value, static_rdzv,
     "Address of the rank 0 node for the static backend; IPv6 as [::1]."},
    {"--master-port,--master_port", "MASTER_PORT", nullptr, value, static_rdzv,
     static_text::text<"Port on the rank 0 node for the static backend; its agent hosts the store there (default ",
                       static_text::decimal<store::wire::kDefaultPort>(),
                       "; one node with neither this nor --rdzv-endpoint: a free port and a fresh run id).">},
    {"--local-addr,--local_addr", "LOCAL_ADDR", nullptr, value, static_rdzv,
     "Address other nodes reach this node by (c10d; default: the address its rendezvous "
     "connection uses)."},

    // Not in torchrun. The environment variables that torch itself reads are
    // handled in extensions.cc.
    {"--event-log,--event_log", "FILE", nullptr, value, extensions,
     "Append one JSON object per agent event (rendezvous, start, exit, restart, ...) to FILE."},
    {"--health-port,--health_port", "PORT", nullptr, value, extensions,
     "Serve HTTP /healthz and /metrics on PORT (0: any free port; default "
     "$TORCHELASTIC_HEALTH_CHECK_PORT, else off)."},
    {"--health-host,--health_host", "HOST", nullptr, value, extensions,
     "Address the health server listens on: an IP address or localhost (default: 127.0.0.1, "
     "this machine only; empty: every interface)."},
    {"--heartbeat-timeout,--heartbeat_timeout", "SECONDS", nullptr, value, extensions,
     "A worker that has sent a heartbeat and then stays silent this long is hung (0: off)."},
    {"--section-timeout,--section_timeout", "NAME=SECONDS", nullptr, value, extensions,
     "Longest a worker may spend in the named section (repeatable; PET_SECTION_TIMEOUT=a=1,b=2).",
     true},
    {"--hang-timeout,--hang_timeout", "SECONDS", nullptr, value, extensions,
     "The job is hung when no worker of a node made progress (CPU time, output, heartbeats) this long: "
     "every rank's stack is taken, the rank that stands apart is named and killed (0: off)."},
    {"--progress-pattern,--progress_pattern", "REGEX", nullptr, value, extensions,
     "A worker output line matching REGEX (Perl syntax, searched in the line without its prefix) is "
     "progress; its first capture group, when a number, is the step (e.g. 'step (\\d+)'). Each attempt's "
     "progress is logged when it ends."},
    {"--checkpoint-dir,--checkpoint_dir", "DIR", nullptr, value, extensions,
     "A file or directory appearing in DIR while an attempt runs is a checkpoint; the last number in its "
     "name is its step (ckpt-000300.pt: 300). DIR may be made by the job."},
    {"--restart-policy,--restart_policy", "POLICY", nullptr, value, extensions,
     "When a failed job restarts (up to --max-restarts): 'progress' (default) stops it with exit code 245 once "
     "the same root cause ended 3 attempts in a row without progress (2 for an OOM kill; ',same-cause=N,oom=N' "
     "to change); 'always' restarts whatever the cause, as torchrun."},
    {"--straggler-action,--straggler_action", "{report,replace,off}", nullptr, value, extensions,
     "A rank or node slower than its peers (it computes while they wait, a slower step, a throttled GPU) is "
     "named within 30 s with its likely cause: 'report' (default) logs it, writes an event and /metrics "
     "gauges; 'replace' also makes a slow node step out (exit 243) for a waiting spare; 'off' samples nothing."},
    {"--kill-timeout,--kill_timeout", "SECONDS", nullptr, value, extensions,
     static_text::text<"How long a worker may outlive SIGKILL (uninterruptible sleep) before cxxrun reports it "
                       "unkillable and exits 242 (default ",
                       static_text::decimal<agent::kDefaultKillTimeout.count()>(), ").">},
    {"--stack-dump-signal,--stack_dump_signal", "SIGNAL", nullptr, value, extensions,
     "Signal (name or number) sent to a hung worker before it is killed, to dump its stacks."},
    {"--tty", "{auto,always,never}", nullptr, none, extensions,
     "Pseudo-terminals for the workers' output, so colours and progress bars work as under "
     "torchrun: auto (the streams shown on a terminal), always, or never (pipes); default "
     "$CXXRUN_TTY, else auto."},
    {"--append-local-rank,--append_local_rank", "{dash,underscore}", nullptr, value, extensions,
     "Give each worker --local-rank=N (dash, torch >= 2.0) or --local_rank=N (underscore, older "
     "torch) right after the program, as python -m torch.distributed.launch does without "
     "--use-env; alone: dash.",
     false, "dash"},
    {"--inject-fault,--inject_fault", "SPEC", nullptr, none, extensions,
     "Testing: kill:rank=R,after=MS[,signal=S][,attempt=A], stop:rank=R,after=MS[,attempt=A], "
     "drop_store:node=N,after=MS or delay_store:node=N,ms=MS (repeatable; also "
     "$CXXRUN_INJECT_FAULTS=\"spec;spec\"); R, N and A must exist in the job.",
     true},

    {"--health-check,--health_check", "CMD", nullptr, value, extensions,
     "A site's own node check, run by /bin/sh before every round (the first and each restart): exit 0 "
     "is healthy; otherwise its first line says why and this node steps out (exit 243) for a spare."},
    {"--health-check-timeout,--health_check_timeout", "SECONDS", nullptr, value, extensions,
     static_text::text<"How long --health-check may take before it counts as failed (default ",
                       static_text::decimal<agent::kDefaultHealthCheckTimeout.count()>(), ").">},
    {"--health-path,--health_path", "PATH[:MIN_FREE]", nullptr, value, extensions,
     "A path this node must be able to write before every round, with at least MIN_FREE free "
     "(e.g. /scratch:50G; K, M, G, T are powers of 1024) (repeatable).",
     true},
    {"--max-node-failures,--max_node_failures", "N", nullptr, value, extensions,
     "A node whose own workers were the first to fail N times in the job steps out at the next restart "
     "(exit 243) for a spare, instead of failing the job again (0: never; default 0)."},
    {"--node-group,--node_group", "NAME", nullptr, value, extensions,
     "This node's topology group (an NVLink domain, a rack): when several spares wait, one of the job's "
     "group takes a free place first (default: Slurm's leaf switch from SLURM_TOPOLOGY_ADDR)."},
    {"--exclude-file,--exclude_file", "FILE", nullptr, value, extensions,
     "A node that steps out (a failed health check) appends its host name to FILE, one per line, for "
     "sbatch --exclude or a node taint."},

    {"--no-slurm,--no_slurm", "", nullptr, flag, extensions,
     "Inside an srun step, do not derive --nnodes, the rendezvous, the run id and the workers per "
     "node from SLURM_* (done only when none of --nnodes, --rdzv-endpoint, --master-addr, "
     "--node-rank is given)."},
    {"--preload", "MOD[,MOD...]", nullptr, value, extensions,
     "Modules the forkserver imports once for all Python workers (with --start-method=forkserver, "
     "default: torch,torch.distributed where they import; with no start method, instead of what it "
     "learns; empty: none)."},

    // One command for every host (docs/multi-host.md): launcher/fanout_plan.h.
    {"--hostfile", "FILE", nullptr, value, hosts,
     "Start one agent per host of FILE through --rsh and run the job across them: lines 'host', 'host "
     "slots=N' (DeepSpeed) or 'host:N' (MPI), '#' comments; a host's slots are its --nproc-per-node unless "
     "that is given. The first host holds the c10d rendezvous unless --rdzv-endpoint is given."},
    {"--hosts", "HOST[:N],...", nullptr, value, hosts, "The same as --hostfile, the hosts given here: h1,h2:4,..."},
    {"--rsh", "CMD", kDefaultRsh, value, hosts,
     "How the launcher reaches a host (with --hostfile/--hosts): run as 'CMD HOST COMMAND...', CMD split as a "
     "shell splits it (as rsync's --rsh)."},
    {"--remote-cxxrun,--remote_cxxrun", "PATH", nullptr, value, hosts,
     "The cxxrun the hosts run (with --hostfile/--hosts; default: this cxxrun's own path)."},
    {"--token-out,--token_out", "FILE", nullptr, value, hosts,
     "With --hostfile/--hosts: write the job's fresh rendezvous token to FILE on this machine (a 0600 file of "
     "yours, for cxxrunctl --token-file). Refused where the launcher makes no token: a token_file of your own "
     "(that is the token), etcd, a store outside the job."},
    {"--from-launcher,--from_launcher", "", nullptr, none, hosts,
     "Set by cxxrun --hostfile on the agents it starts: the first stdin line is the rendezvous token, later "
     "lines the launcher's signals; stdin's end stops this node's workers and the agent."},

    {"--version", "", nullptr, none, general, "show cxxrun's version and exit"},
};

}  // namespace

std::span<const OptionSpec> option_table() { return kOptions; }

std::vector<std::string_view> spellings_of(const OptionSpec& spec) {
  std::vector<std::string_view> out;
  std::string_view rest = spec.names;
  for (;;) {
    auto comma = rest.find(',');
    out.push_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) return out;
    rest.remove_prefix(comma + 1);
  }
}

std::string main_name_of(const OptionSpec& spec) {
  std::string_view rest = spec.names;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string_view name = rest.substr(0, comma);
    if (name.starts_with("--")) return std::string(name);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
  return std::string(spec.names);
}

std::string dest_of(const OptionSpec& spec) {
  std::string dest = main_name_of(spec).substr(2);
  std::replace(dest.begin(), dest.end(), '-', '_');
  return dest;
}

std::string env_name_of(const OptionSpec& spec) {
  std::string name = "PET_" + dest_of(spec);
  for (char& c : name) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return name;
}

std::string_view group_title(Group group) {
  switch (group) {
    case Group::general: return "options";
    case Group::workers: return "worker group";
    case Group::rendezvous: return "rendezvous";
    case Group::launch: return "launching the training program";
    case Group::logging: return "logging";
    case Group::static_rdzv: return "static rendezvous (caffe2-compatible)";
    case Group::extensions: return "cxxrun extensions";
    case Group::hosts: return "one command for every host (cxxrun extensions)";
  }
  return "";
}

}  // namespace cxxrun::launcher
