#include "agent/report/event_log.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>
#include <system_error>

#include "agent/config.h"
#include "agent/forensics/failure.h"
#include "agent/hostname.h"
#include "agent/process/private_files.h"
#include "agent/forensics/death.h"
#include "agent/forensics/summary.h"

namespace cxxrun::agent {
namespace {

using Json = nlohmann::ordered_json;

// Error files hold a message and a traceback; anything bigger is not one,
// and must not become a multi-megabyte event line.
constexpr std::streamsize kMaxErrorFileBytes = 1 << 20;

// torch's raw_error for a failed worker: json.dumps of the parsed error file.
std::optional<std::string> error_file_json(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string text(kMaxErrorFileBytes + 1, '\0');
  in.read(text.data(), kMaxErrorFileBytes + 1);
  if (in.gcount() > kMaxErrorFileBytes) return std::nullopt;
  text.resize(static_cast<size_t>(in.gcount()));
  Json parsed = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return std::nullopt;
  return parsed.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string_view state_of(std::string_view name) { return name.substr(name.rfind('.') + 1); }

}  // namespace

std::string_view event_name(WorkerStatus status) {
  switch (status) {
    case WorkerStatus::start: return "torchelastic.worker.status.START";
    case WorkerStatus::succeeded: return "torchelastic.worker.status.SUCCEEDED";
    case WorkerStatus::failed: return "torchelastic.worker.status.FAILED";
    case WorkerStatus::terminated: return "torchelastic.worker.status.TERMINATED";
    case WorkerStatus::healthy: return "torchelastic.worker.status.HEALTHY";
    case WorkerStatus::unhealthy: break;
  }
  return "torchelastic.worker.status.UNHEALTHY";
}

std::string_view event_name(AgentEvent event) {
  switch (event) {
    case AgentEvent::rendezvous: return "torchelastic.worker.status.RENDEZVOUS";
    case AgentEvent::assign_worker_ranks: return "torchelastic.worker.status.ASSIGN_WORKER_RANKS";
    case AgentEvent::succeeded: return "torchelastic.worker.status.SUCCEEDED";
    case AgentEvent::failed: return "torchelastic.worker.status.FAILED";
    case AgentEvent::node_unhealthy: return "cxxrun.agent.NODE_UNHEALTHY";
    case AgentEvent::attempt_progress: return "cxxrun.agent.ATTEMPT_PROGRESS";
    case AgentEvent::verdict: return "cxxrun.agent.VERDICT";
    case AgentEvent::phase: return "cxxrun.agent.PHASE";
    case AgentEvent::goodput: return "cxxrun.agent.GOODPUT";
    case AgentEvent::straggler: return "cxxrun.agent.STRAGGLER";
    case AgentEvent::restart: break;
  }
  return "cxxrun.agent.RESTART";
}

EventContext event_context(const Config& config, const rendezvous::Assignment& placement, int restart_count) {
  EventContext c;
  c.run_id = config.run_id;
  c.role = config.role;
  c.rdzv_backend = !config.rdzv.name.empty()                 ? config.rdzv.name
                   : config.rdzv.backend == rendezvous::Backend::c10d ? "c10d"
                                                          : "static";
  c.entry_point = config.entrypoint_name;
  c.group_rank = placement.group_rank;
  c.group_world_size = placement.group_world_size;
  c.world_size = placement.world_size;
  c.restart_count = restart_count;
  return c;
}

EventLog::EventLog(const std::string& path, bool console)
    : console_(console), path_(path), started_(std::chrono::steady_clock::now()) {
  if (!path.empty() || console) hostname_ = this_hostname();
  if (path.empty()) return;
  // O_NONBLOCK: opening a FIFO with no reader fails instead of hanging, and
  // a full one drops events; regular files ignore the flag. A file it
  // creates is 0600: the job's events are the job's user's. A link another
  // user planted at the path is not followed (agent/process/private_files.h).
  std::string why;
  fd_ = open_named_file(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, why);
  if (fd_ < 0) {
    const int e = errno;
    throw std::system_error(e, std::generic_category(), "cannot open event log " + path + (e == ELOOP ? " (" + why + ")" : ""));
  }
}

EventLog::~EventLog() {
  if (fd_ >= 0) ::close(fd_);
}

void EventLog::worker_status(WorkerStatus status, const WorkerRef& worker, EventDetails details) {
  if (!enabled()) return;
  write_event(event_name(status), true, &worker, details);
}

void EventLog::worker_failed(const Failure& f) {
  if (!enabled()) return;
  EventDetails details;
  details.raw_error = error_file_json(f.error_file);
  // A failure reported by another node carries its error file's message.
  if (!details.raw_error)
    details.raw_error = Json{{"message", f.message.empty() ? describe(f) : f.message}}.dump(
        -1, ' ', false, Json::error_handler_t::replace);
  details.extra["exit_code"] = shell_exit_code(f);
  if (f.signal != 0) details.extra["signal"] = signal_name(f.signal);
  details.extra["cause"] = std::string(death_name(cause_of(f)));
  details.extra["cause_detail"] = explain(f);
  const WorkerRef worker{f.local_rank, f.rank, f.pid};
  write_event(event_name(WorkerStatus::failed), true, &worker, details);
}

void EventLog::agent_event(AgentEvent event, EventDetails details) {
  if (!enabled()) return;
  write_event(event_name(event), false, nullptr, details);
}

void EventLog::node_unhealthy(const std::string& check, const std::string& line) {
  EventDetails details;
  details.raw_error = line;
  details.extra["check"] = check;
  details.extra["excluded_host"] = this_hostname();
  agent_event(AgentEvent::node_unhealthy, details);
}

void EventLog::write_event(std::string_view name, bool worker_source, const WorkerRef* worker,
                           EventDetails& details) {
  const EventContext& c = context_;
  Json md = {{"group_world_size", c.group_world_size}, {"entry_point", c.entry_point}};
  if (worker) {
    md["local_rank"] = worker->local_rank;
    md["role_rank"] = worker->rank;
    md["role_world_size"] = c.world_size;
  }
  for (auto& [key, value] : details.extra) std::visit([&md, &key](auto& v) { md[key] = std::move(v); }, value);

  Json global_rank = nullptr, worker_id = nullptr, raw_error = nullptr, duration_ms = nullptr;
  if (worker) global_rank = worker->rank;
  if (worker && worker->pid > 0) worker_id = std::to_string(worker->pid);
  if (details.raw_error) raw_error = std::move(*details.raw_error);
  if (details.duration_ms) duration_ms = *details.duration_ms;

  const auto run_seconds =
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_).count();
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const auto dump = [](const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); };

  Json event = {{"name", name},
                {"source", worker_source ? "WORKER" : "AGENT"},
                {"timestamp", now_ms},
                {"metadata",
                 {{"run_id", c.run_id},
                  {"global_rank", global_rank},
                  {"group_rank", c.group_rank},
                  {"worker_id", worker_id},
                  {"role", c.role},
                  {"hostname", c.hostname.empty() ? hostname_ : c.hostname},
                  {"state", state_of(name)},
                  {"total_run_time", run_seconds},
                  {"rdzv_backend", c.rdzv_backend},
                  {"raw_error", raw_error},
                  {"metadata", dump(md)},
                  {"agent_restarts", c.restart_count},
                  {"duration_ms", duration_ms}}}};
  write_line(dump(event) + "\n");
}

void EventLog::write_line(const std::string& line) {
  if (console_) {
    ssize_t n;  // one write: lines of several agents on one terminal stay whole
    do {
      n = ::write(STDERR_FILENO, line.data(), line.size());
    } while (n < 0 && errno == EINTR);
  }
  if (fd_ < 0) return;
  // One write(2): O_APPEND places the whole line at the end atomically with
  // respect to other appenders, which is what keeps shared files readable.
  ssize_t n;
  do {
    n = ::write(fd_, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(line.size())) {
    if (failing_) spdlog::info("event log {}: writing again", path_);
    failing_ = false;
    return;
  }
  if (!failing_)
    spdlog::warn("event log {}: {}; dropping events until writes succeed",
                 path_, n < 0 ? std::strerror(errno) : "short write");
  failing_ = true;
}

}  // namespace cxxrun::agent
