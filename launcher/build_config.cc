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
  double s = parse_positive_seconds(*given);
  if (s > kMaxShutdownSeconds) throw UsageError(given->shown() + ": longer than 1e9 seconds");
  return milliseconds(std::max<long long>(1, std::llround(std::ceil(s * 1000))));
}

// torch accepts any rank here and then shows nothing for the ones this node
// lacks; --local-ranks-filter=9 with two workers would hide all output.
void check_local_ranks_filter(const RawValue& filter, const std::set<int>& ranks,
                              const RawValue& nproc, int n) {
  for (int rank : ranks)
    if (rank >= n)
      throw UsageError(fmt::format("{}: local rank {} is out of range: {} gives local ranks 0..{}",
                                   filter.shown(), rank, nproc.shown(), n - 1));
}

// The agent creates <log-dir>/<run_id>_<random>/ (agent/log_dir.cc), and a
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
  fs::create_directories(dir, ec);
  if (ec)
    throw UsageError(
        fmt::format("{}: cannot create directory {}: {}", value.shown(), dir, ec.message()));
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
                     ": not supported by cxxrun: it names a Python entry point "
                     "(torchrun.logs_specs group)");
  if (const RawValue* v = raw.find("numa_binding"))
    throw NotBuiltYet(v->shown() + ": NUMA binding is not built yet");
  if (const RawValue& v = raw.at("event_log_handler"); v.text != "null")
    throw NotBuiltYet(v.shown() + ": event log handlers are not built yet (only 'null')");
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
  parse_int(raw.at("node_rank"));
  parse_port(raw.at("master_port"));
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
  check_local_ranks_filter(raw.at("local_ranks_filter"), c.local_ranks_filter, nproc,
                           c.nproc_per_node);
  check_fault_targets(raw, env,
                      {c.nproc_per_node, parse_nnodes(raw.at("nnodes")).second, c.max_restarts,
                       raw.at("max_restarts").shown()});

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

  // 6. Last, since it creates the log directory: nothing may refuse after it.
  if (const RawValue* dir = raw.find("log_dir")) check_log_dir(*dir);
  return out;
}

}  // namespace cxxrun::launcher
