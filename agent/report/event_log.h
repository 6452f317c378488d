// torchelastic's events (docs/torchrun-compat.md §10.3) as JSON lines in a file, so tools
// written for torchrun's event stream read cxxrun's. Each event is one
// object on one line:
//
//   {"name": "torchelastic.worker.status.FAILED", "source": "WORKER",
//    "timestamp": <ms since the epoch>,
//    "metadata": {"run_id", "global_rank", "group_rank", "worker_id", "role",
//                 "hostname", "state", "total_run_time", "rdzv_backend",
//                 "raw_error", "metadata", "agent_restarts", "duration_ms"}}
//
// with torch's key order and null where torch has None. Deliberate
// differences from torch: "timestamp" is the real time (torch leaves 0);
// "total_run_time" counts whole seconds since the EventLog was made (torch
// reports 0 until its run ends); "hostname" is gethostname(), never a DNS
// lookup; the inner "metadata" string holds plain integers where torch
// writes one-element lists (a trailing-comma slip in torch's
// _construct_event), plus any cxxrun extras.
//
// Event names (`state` in the metadata is the part after the last dot):
//   WORKER torchelastic.worker.status.START       a worker process started
//   WORKER torchelastic.worker.status.SUCCEEDED   it exited 0
//   WORKER torchelastic.worker.status.FAILED      it failed; raw_error = its error file
//   WORKER torchelastic.worker.status.TERMINATED  the agent stopped it (a sibling failed, a signal)
//   WORKER torchelastic.worker.status.UNHEALTHY   the agent judged it hung (missed heartbeats, timer)
//   AGENT  torchelastic.worker.status.RENDEZVOUS           duration_ms of a rendezvous round
//   AGENT  torchelastic.worker.status.ASSIGN_WORKER_RANKS  duration_ms of rank assignment
//   AGENT  torchelastic.worker.status.SUCCEEDED   the agent's loop ended normally (its
//                                                 workers may have failed: see WORKER events)
//   AGENT  torchelastic.worker.status.FAILED      the agent itself ended badly (a signal, an
//                                                 error); raw_error says why
//   AGENT  cxxrun.agent.RESTART                   the worker group restarts (torch only logs it);
//                                                 agent_restarts is the new restart count
//   AGENT  cxxrun.agent.ATTEMPT_PROGRESS          an attempt's group stopped, with its progress
//                                                 (agent/progress/attempt_record.h), when
//                                                 progress is tracked: duration_ms (spawn to
//                                                 end) and in the inner metadata "attempt",
//                                                 then only what is known: "first_progress_ms"
//                                                 (after spawn), "step", "step_source"
//                                                 (output, program, checkpoint), "step_ms"
//                                                 (when it was first seen, after spawn),
//                                                 "steps_per_s", "checkpoints" (how many
//                                                 appeared), "checkpoint", "checkpoint_step",
//                                                 "checkpoint_ms" (the last one's name, step,
//                                                 time after spawn)
//   AGENT  cxxrun.agent.VERDICT                   a failed attempt was judged before the restart
//                                                 decision (agent/verdict/judge.h): inner
//                                                 metadata "attempt", "verdict" (restart, stop),
//                                                 "cause" (the root cause in words), "repeats"
//                                                 (attempts in a row with it and no progress),
//                                                 "judged" (failed attempts judged in the job,
//                                                 across requeues), "evidence" (the line), and
//                                                 where known "step", "best_step",
//                                                 "checkpoint_step"
//   AGENT  cxxrun.agent.PHASE                     one closed span of one goodput phase
//                                                 (agent/progress/goodput.h), once its phase
//                                                 is known (an attempt's pieces when it ends):
//                                                 duration_ms its length, and in the inner
//                                                 metadata "phase" (rendezvous, startup,
//                                                 productive, lost, hang_detection, teardown,
//                                                 waiting), "attempt", "start_ms" and "end_ms"
//                                                 (ms since the epoch); a node's spans tile
//                                                 its wall time, each starting where the last
//                                                 ended
//   AGENT  cxxrun.agent.GOODPUT                   the agent exits: in the inner metadata
//                                                 "goodput" (productive / wall), "wall_ms",
//                                                 and "<phase>_ms" for every phase
//   AGENT  cxxrun.agent.STRAGGLER                 a rank or node was named slower than its peers,
//                                                 or cleared (agent/straggler/straggler_watch.h,
//                                                 docs/stragglers.md), by the node that judged
//                                                 it: inner metadata "state" (named, cleared),
//                                                 "scope" (rank, node), "rank" (a node: its
//                                                 first), "ranks", "node_rank", "host",
//                                                 "signal" (step, compute, gpu-clock), "ratio"
//                                                 (how much slower than the median peer),
//                                                 "cause" (cgroup-throttle, gpu-throttle, steal,
//                                                 cpu-wait, memory-pressure, io-pressure,
//                                                 cpu-pressure, none), "action" (report,
//                                                 replace) and "line" (what the log said)
//   AGENT  cxxrun.agent.NODE_UNHEALTHY            this node failed a health check before a round
//                                                 and steps out; raw_error says which and why,
//                                                 "excluded_host" names it for the scheduler
//
// --event-log-handler=console (torch's StreamHandler) writes the same lines
// to stderr as well, one write(2) each.
//
// Lines go out with one write(2) each on an O_APPEND descriptor, so several
// agents (or EventLogs) on one host may share a file without tearing lines.
// The descriptor is non-blocking: a FIFO nobody reads drops events instead
// of stalling the agent. Write errors are logged, never thrown: losing an
// event must not kill a job.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace cxxrun::rendezvous {
struct Assignment;
}

namespace cxxrun::agent {

struct Config;
struct Failure;

enum class WorkerStatus { start, succeeded, failed, terminated, unhealthy, healthy };
enum class AgentEvent { rendezvous, assign_worker_ranks, succeeded, failed, restart, node_unhealthy, attempt_progress,
                        verdict, phase, goodput, straggler };

// The full event name, e.g. "torchelastic.worker.status.START".
std::string_view event_name(WorkerStatus status);
std::string_view event_name(AgentEvent event);

// What every event says about this node. Refresh it after each rendezvous
// and restart; the EventLog reads it when an event is written.
struct EventContext {
  std::string run_id = "none";
  std::string role = "default";
  std::string rdzv_backend = "static";
  std::string entry_point;
  std::string hostname;  // empty: gethostname()
  int group_rank = 0;
  int group_world_size = 1;
  int world_size = 1;     // role_world_size of worker events (cxxrun has one role)
  int restart_count = 0;  // agent_restarts: restarts made so far
};

// The context for `config` as the launcher or a rendezvous left it.
// Backend::local reads "static" (what torchrun reports without
// --standalone), static_tcp "static", c10d "c10d".
EventContext event_context(const Config& config, const rendezvous::Assignment& placement, int restart_count = 0);

// One worker as events name it.
struct WorkerRef {
  int local_rank = 0;
  int rank = 0;   // global rank; also the role rank
  pid_t pid = 0;  // worker_id; 0 (never started) reads null
};

struct EventDetails {
  std::optional<double> duration_ms;
  std::optional<std::string> raw_error;
  // cxxrun additions, merged into the inner "metadata" JSON string.
  std::map<std::string, std::variant<long long, std::string, double>> extra;
};

class EventLog {
 public:
  // Empty path and no console: disabled; every call returns at once.
  // Otherwise the file is created (0644) or appended to; std::system_error
  // naming the path if it cannot be opened. `console`: every line to stderr too.
  explicit EventLog(const std::string& path, bool console = false);
  ~EventLog();
  EventLog(const EventLog&) = delete;
  EventLog& operator=(const EventLog&) = delete;

  bool enabled() const { return fd_ >= 0 || console_; }
  EventContext& context() { return context_; }

  // A WORKER event. `raw_error` is JSON text (torch: the error file's
  // contents); nullopt reads null.
  void worker_status(WorkerStatus status, const WorkerRef& worker, EventDetails details = {});
  // FAILED for `f`, raw_error from its error file as torch does, else
  // {"message": f.message or describe(f)}; the exit code, signal and cause
  // (agent/forensics/death.h: "cause" its name, "cause_detail" its evidence) go into
  // the inner metadata.
  void worker_failed(const Failure& f);
  // An AGENT event (global_rank and worker_id null). For FAILED, raw_error
  // is free text saying why (torch puts a traceback there).
  void agent_event(AgentEvent event, EventDetails details = {});
  // NODE_UNHEALTHY: this node failed `check` (`line` says how) and steps
  // out; the inner metadata names the check and this host for the scheduler.
  void node_unhealthy(const std::string& check, const std::string& line);

 private:
  void write_event(std::string_view name, bool worker_source, const WorkerRef* worker, EventDetails& details);
  void write_line(const std::string& line);

  int fd_ = -1;
  bool console_ = false;
  std::string path_;
  EventContext context_;
  std::string hostname_;
  std::chrono::steady_clock::time_point started_;
  bool failing_ = false;
};

}  // namespace cxxrun::agent
