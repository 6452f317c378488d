// Interprets the raw options in a fixed order so that the first error a user
// sees is the most basic one: value syntax, then features cxxrun lacks and
// rendezvous options that do not fit together, then the program, then the
// ports (the rendezvous's, the health server's).
#include <errno.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <set>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "agent/numa/binding.h"
#include "agent/process/private_files.h"
#include "launcher/devices.h"
#include "launcher/extensions.h"
#include "launcher/program.h"
#include "launcher/raw_options.h"
#include "launcher/rendezvous_choice.h"
#include "launcher/start_method.h"
#include "launcher/values.h"

namespace cxxrun::launcher {
namespace {

using namespace std::chrono;

// torchrun's banner, byte for byte (including the space before the last "\n").
constexpr const char* kOmpWarning =
    "\n*****************************************\n"
    "Setting OMP_NUM_THREADS environment variable for each process to be 1 in default, to avoid "
    "your system being overloaded, please further tune the variable for optimal performance in "
    "your application as needed. \n"
    "*****************************************";

constexpr double kMaxShutdownSeconds = 1e9;

std::optional<std::string> env_value(const Env& env, std::string_view name) {
  auto it = env.find(name);
  if (it == env.end()) return std::nullopt;
  return it->second;
}

milliseconds shutdown_timeout(const RawOptions& raw, const Env& env) {
  std::optional<RawValue> given;
  if (const RawValue* v = raw.find("shutdown_timeout"))
    given = *v;
  else if (auto e = env_value(env, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"))
    given = RawValue{*e, "TORCH_ELASTIC_SHUTDOWN_TIMEOUT"};
  if (!given) return agent::kDefaultShutdownTimeout;
  auto s = number_of(given->text);
  if (!s || *s < 0) throw UsageError(given->shown() + ": must be a number of seconds >= 0 (0: SIGKILL at once)");
  if (*s > kMaxShutdownSeconds) throw UsageError(given->shown() + ": longer than 1e9 seconds");
  if (*s == 0) return milliseconds(0);
  return milliseconds(std::max<long long>(1, std::llround(std::ceil(*s * 1000))));
}

// --local-ranks-filter naming ranks this node lacks: torch shows the others
// and goes on. Naming none that exist would hide all output, which no one
// asks for on purpose.
void check_local_ranks_filter(const RawValue& filter, std::set<int>& ranks, const RawValue& nproc, int n,
                              std::vector<std::string>& warnings) {
  std::vector<int> missing;
  for (int rank : ranks)
    if (rank >= n) missing.push_back(rank);
  if (missing.empty()) return;
  if (missing.size() == ranks.size())
    throw UsageError(fmt::format("{}: no such local rank: {} gives local ranks 0..{}, so no output would be shown",
                                 filter.shown(), nproc.shown(), n - 1));
  for (int rank : missing) ranks.erase(rank);
  warnings.push_back(fmt::format("{}: local rank{} {} not on this node ({} gives local ranks 0..{}); showing {}",
                                 filter.shown(), missing.size() > 1 ? "s" : "", fmt::join(missing, ", "),
                                 nproc.shown(), n - 1, fmt::join(ranks, ", ")));
}

// torch's comma_separated_list: ",," is a literal comma. An empty text is no
// filter at all.
std::vector<std::string> parse_filters(const RawValue& value) {
  std::vector<std::string> out;
  if (value.text.empty()) return out;
  std::string item;
  for (size_t i = 0; i < value.text.size(); ++i) {
    if (value.text[i] != ',') {
      item += value.text[i];
    } else if (i + 1 < value.text.size() && value.text[i + 1] == ',') {
      item += ',';
      ++i;
    } else {
      out.push_back(std::move(item));
      item.clear();
    }
  }
  out.push_back(std::move(item));
  return out;
}

// The duplicate filters read the tee'd streams' lines in the attempt's
// directory: without either there is nothing to copy.
void check_duplicate_filters(const RawOptions& raw, const agent::Config& c, std::vector<std::string>& warnings) {
  for (auto [dest, bit] : {std::pair{"duplicate_stdout_filters", agent::Std::out},
                           std::pair{"duplicate_stderr_filters", agent::Std::err}}) {
    const RawValue& v = raw.at(dest);
    if (v.text.empty()) continue;
    bool teed = false;
    for (int r = 0; r < c.nproc_per_node; ++r) teed = teed || has(c.tee.for_rank(r), bit);
    if (!teed)
      warnings.push_back(v.shown() + " copies nothing: only the streams given to --tee are copied (e.g. --tee=3)");
    else if (c.log_dir == "/dev/null")
      warnings.push_back(v.shown() + " copies nothing: --log-dir=/dev/null writes no files");
  }
}

// --virtual-local-rank: worker i's one device is the agent's i-th visible
// device, or GPU i when the agent sees them all (torch's rule).
std::vector<std::string> visible_devices(const Env& env, const RawValue& nproc, int n) {
  std::vector<std::string> out;
  auto cvd = env_value(env, "CUDA_VISIBLE_DEVICES");
  if (!cvd) {
    for (int i = 0; i < n; ++i) out.push_back(std::to_string(i));
    return out;
  }
  std::vector<std::string> devices;
  for (std::string_view d : split(*cvd, ',')) devices.emplace_back(trim(d));
  if (cvd->empty() || static_cast<int>(devices.size()) < n)
    throw UsageError(fmt::format("--virtual-local-rank: {} workers ({}) but CUDA_VISIBLE_DEVICES={} lists {} device{}; "
                                 "each worker needs one of its own",
                                 n, nproc.shown(), *cvd, cvd->empty() ? 0 : devices.size(),
                                 devices.size() == 1 && !cvd->empty() ? "" : "s"));
  devices.resize(n);
  return devices;
}

// The agent creates <log-dir>/<run_id>_<random>/ (agent/workers/log_dir.cc), and a
// failure there is exit 1 after the store is up. Doing first what it will do
// (create the directory, then one inside it) catches every reason, root's
// included: a read-only file system, a file in the way, /proc.
void check_log_dir(const RawValue& value) {
  namespace fs = std::filesystem;
  const std::string& dir = value.text;
  if (dir.empty() || dir == "/dev/null") return;  // a fresh temporary one; none
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw UsageError(fmt::format("{}: {} is not a directory", value.shown(), dir));
  // Made 0700, as everything cxxrun makes for a job (agent/process/private_files.h).
  std::string why_not;
  if (!agent::make_private_dirs(dir, why_not)) throw UsageError(fmt::format("{}: {}", value.shown(), why_not));
  std::string probe = (fs::path(dir) / ".cxxrun_probe_XXXXXX").string();
  if (mkdtemp(probe.data()) == nullptr)
    throw UsageError(fmt::format("{}: cannot create files in directory {}: {}", value.shown(), dir,
                                 std::strerror(errno)));
  fs::remove(probe, ec);
}

// Accepted and valid, but not something this cxxrun can do; then the
// rendezvous options that do not fit together.
void refuse_missing_features(const RawOptions& raw) {
  if (const RawValue* v = raw.find("logs_specs"))
    throw UsageError(v->shown() +
                     ": cxxrun runs no Python plugins (torchrun.logs_specs entry points); where logs go is set "
                     "with --log-dir, --redirects, --tee, --local-ranks-filter and "
                     "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE");
  check_rendezvous_supported(raw);
}

}  // namespace

Parsed build_config(const RawOptions& raw, const Env& env) {
  Parsed out;
  agent::Config& c = out.config;

  // 1. Every value's own syntax.
  parse_nnodes(raw.at("nnodes"));
  c.max_restarts = parse_max_restarts(raw.at("max_restarts"));
  parse_positive_seconds(raw.at("monitor_interval"));  // we react to exits, not poll
  check_choice(raw.at("start_method"), {"spawn", "fork", "forkserver"});
  c.redirects = parse_std_spec(raw.at("redirects"));
  c.tee = parse_std_spec(raw.at("tee"));
  c.local_ranks_filter = parse_local_ranks_filter(raw.at("local_ranks_filter"));
  apply_rdzv_conf_option(raw.at("rdzv_conf"), c.rdzv);
  const RawValue& signals = raw.at("signals_to_handle");
  c.signals_to_handle = parse_signals(signals);
  // What cxxrun added to the list itself (launcher/slurm.h) only reaches
  // the workers; what the user listed ends the job, as in torch.
  if (const RawValue* added = raw.find("signals_forward_only"))
    for (int sig : parse_signals(*added)) c.forward_only_signals.insert(sig);
  // torch's handlers: console is a StreamHandler on stderr, dynamic_rendezvous
  // a NullHandler (its name is that of torch's rendezvous event logger).
  const RawValue& handler = raw.at("event_log_handler");
  check_choice(handler, {"null", "console", "dynamic_rendezvous"});
  c.event_log_console = handler.text == "console";
  c.duplicate_stdout_filters = parse_filters(raw.at("duplicate_stdout_filters"));
  c.duplicate_stderr_filters = parse_filters(raw.at("duplicate_stderr_filters"));
  parse_int(raw.at("node_rank"));
  if (const RawValue* port = raw.find("master_port")) parse_port(*port);
  c.shutdown_timeout = shutdown_timeout(raw, env);
  if (auto level = env_value(env, "LOGLEVEL")) out.log_level = parse_log_level({*level, "LOGLEVEL"});
  if (const RawValue* numa = raw.find("numa_binding"))
    check_choice(*numa, {"node", "socket", "exclusive", "core-complex"});
  apply_extensions(raw, env, c, out.warnings);
  std::vector<std::string> local_rank = local_rank_args(raw.find("append_local_rank"));

  // 2. Valid requests for what this cxxrun does not do; --nnodes, --node-rank
  // and the backend's endpoint against each other.
  refuse_missing_features(raw);

  // 3. How many workers, and what each runs.
  const RawValue& nproc = raw.at("nproc_per_node");
  bool wants_gpus = nproc.text == "gpu" || nproc.text == "auto";
  DeviceCounts counts{cpu_count(), wants_gpus ? nvidia_gpu_count(env) : 0, process_limit()};
  c.nproc_per_node = resolve_nproc(nproc, counts, out.notes);
  check_local_ranks_filter(raw.at("local_ranks_filter"), c.local_ranks_filter, nproc, c.nproc_per_node,
                           out.warnings);
  if (raw.flag("virtual_local_rank")) c.visible_devices = visible_devices(env, nproc, c.nproc_per_node);
  check_fault_targets(raw, env,
                      {c.nproc_per_node, parse_nnodes(raw.at("nnodes")).second, c.max_restarts,
                       raw.at("max_restarts").shown()});
  // Each worker near its GPU, as hwloc sees this host (HWLOC_XMLFILE,
  // hwloc's own variable, puts another host's topology in its place).
  if (const RawValue* numa = raw.find("numa_binding")) {
    try {
      c.numa_binding = agent::plan_numa_binding(
          agent::read_numa_topology(env_value(env, "HWLOC_XMLFILE").value_or("")),
          {*agent::numa_mode_named(numa->text), c.nproc_per_node, env_value(env, "CUDA_VISIBLE_DEVICES"),
           agent::agent_affinity()});
    } catch (const agent::NumaBindingError& e) {
      throw UsageError(numa->shown() + ": " + e.what());
    } catch (const agent::TopologyError& e) {
      throw UsageError(numa->shown() + ": " + e.what());
    }
  }

  if (!raw.has_program)
    throw UsageError("missing the training program: cxxrun [options] training_script [args...]");
  Program program = build_program({raw.program, raw.program_args, std::move(local_rank),
                                   raw.flag("module"), raw.flag("no_python"), raw.flag("run_path")},
                                  env);
  apply_start_method(raw, program, c, out.warnings);
  const bool python_program = program.python;
  c.command = std::move(program.command);
  c.entrypoint_name = std::move(program.entrypoint_name);

  // 4. Where the nodes and workers meet.
  choose_rendezvous(raw, c, out.warnings, out.notes);
  c.rdzv.settings.node_group = node_group(raw, env);
  check_health_endpoint(raw, env, c);
  // As torch >= 2.4 does, the agent serves the workers' store (MASTER_PORT)
  // itself unless TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1: it outlives a worker
  // restart and no worker races another process for the port. The static
  // backend across nodes always shares node 0's store, as torch's does.
  if (c.rdzv.backend != rendezvous::Backend::static_tcp)
    c.use_agent_store = env_value(env, "TORCH_DISABLE_SHARE_RDZV_TCP_STORE").value_or("0") != "1";

  // 5. The rest, as torchrun passes it.
  c.role = raw.at("role").text;
  if (const RawValue* dir = raw.find("log_dir")) c.log_dir = dir->text;
  c.log_line_prefix_template = env_value(env, "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE").value_or("");
  if (!env.contains("OMP_NUM_THREADS") && c.nproc_per_node > 1) {
    c.extra_env.emplace("OMP_NUM_THREADS", "1");
    out.warnings.push_back(kOmpWarning);
  }
  c.extra_env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] =
      env_value(env, "TORCH_NCCL_ASYNC_ERROR_HANDLING").value_or("1");
  c.extra_env["TORCHELASTIC_SIGNALS_TO_HANDLE"] = signals.text;
  // A Python worker that crashes (SIGSEGV, SIGBUS, SIGABRT, SIGFPE, SIGILL)
  // then prints every thread's Python stack, which the failure summary's
  // tail shows; without it a segfault is a bare signal and a pid. The user's
  // own PYTHONFAULTHANDLER, even empty (off), is their choice and stays.
  if (python_program && !env.contains("PYTHONFAULTHANDLER")) c.extra_env["PYTHONFAULTHANDLER"] = "1";

  check_duplicate_filters(raw, c, out.warnings);

  // 6. Last, since it creates the log directory: nothing may refuse after it.
  if (const RawValue* dir = raw.find("log_dir")) check_log_dir(*dir);
  return out;
}

}  // namespace cxxrun::launcher
