#include "agent/forensics/failure.h"

#include <signal.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "agent/exit_codes.h"
#include "agent/forensics/python_traceback.h"

namespace cxxrun::agent {
namespace {

std::optional<std::chrono::system_clock::time_point> parse_timestamp(const nlohmann::json& j) {
  try {
    long long secs = j.is_string() ? std::stoll(j.get<std::string>()) : j.get<long long>();
    return std::chrono::system_clock::time_point(std::chrono::seconds(secs));
  } catch (...) {
    return std::nullopt;
  }
}

std::chrono::system_clock::time_point from_ns(long long ns) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::nanoseconds(ns)));
}

std::chrono::system_clock::time_point time_of(const Failure& f, const std::optional<ErrorFileMessage>& m) {
  if (m && m->written) return *m->written;
  // A traceback printed just before the end is the failure; one printed
  // long before was caught, and the program went on.
  const auto tb = f.traceback_time;
  if (tb.time_since_epoch().count() != 0 && tb <= f.time && f.time - tb <= kConsequenceWindow) return tb;
  return f.time;
}

// What a rank says when a peer it talks to went away (Gloo, NCCL, cxxrun's
// own runtime, a TCPStore connection).
constexpr std::string_view kCommunicationErrors[] = {
    "Connection closed by peer",
    "Connection reset by peer",
    "Broken pipe",
    "NCCL communicator was aborted",
    "ncclRemoteError",
    "remote process exited or there was a network error",
    "a peer failed or the network broke",
};

bool mentions_communication_error(std::string_view text) {
  for (std::string_view e : kCommunicationErrors)
    if (text.find(e) != std::string_view::npos) return true;
  return false;
}

std::string first_line_of(const std::string& text) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    line = line.substr(b);
    return line.size() > 300 ? line.substr(0, 300) + "..." : line;
  }
  return "";
}

}  // namespace

std::optional<ErrorFileMessage> message_of(const Failure& f) {
  if (f.message.empty()) return read_error_file(f.error_file);
  return ErrorFileMessage{f.message, std::nullopt, std::nullopt};
}

int shell_exit_code(const Failure& f) { return f.signal ? exit_code::signalled(f.signal) : f.exit_code; }

void set_status(Failure& f, int status) {
  if (WIFSIGNALED(status)) {
    f.signal = WTERMSIG(status);
    f.exit_code = 0;
  } else {
    f.signal = 0;
    f.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
  }
}

std::string clock_time(std::chrono::system_clock::time_point tp) {
  const time_t t = std::chrono::system_clock::to_time_t(tp);
  tm local{};
  localtime_r(&t, &local);
  char buf[16];
  strftime(buf, sizeof buf, "%H:%M:%S", &local);
  return buf;
}

std::string signal_name(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

std::optional<ErrorFileMessage> read_error_file(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path);
  if (!in) return std::nullopt;
  auto data = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (data.is_discarded() || !data.is_object() || !data.contains("message")) return std::nullopt;
  const auto& m = data["message"];
  ErrorFileMessage out;
  if (m.is_object()) {
    auto extra = m.value("extraInfo", nlohmann::json::object());
    if (extra.is_object() && extra.contains("py_callstack") && extra["py_callstack"].is_string())
      out.text = extra["py_callstack"].get<std::string>();
    else if (m.contains("message") && m["message"].is_string())
      out.text = m["message"].get<std::string>();
    else
      out.text = m.dump();
    if (extra.is_object() && extra.contains("timestamp")) out.time = parse_timestamp(extra["timestamp"]);
    if (extra.is_object() && extra.contains("timestamp_ns") && extra["timestamp_ns"].is_number_integer())
      out.time = out.written = from_ns(extra["timestamp_ns"].get<long long>());
  } else {
    out.text = m.is_string() ? m.get<std::string>() : m.dump();
    if (data.contains("timestamp")) out.time = parse_timestamp(data["timestamp"]);
  }
  // torch writes whole seconds, so two ranks failing in one second tie; the
  // file's mtime tells them apart (to the kernel's clock tick).
  struct stat st {};
  if (!out.written && stat(path.c_str(), &st) == 0)
    out.written = from_ns(st.st_mtim.tv_sec * 1'000'000'000LL + st.st_mtim.tv_nsec);
  return out;
}

std::string to_record(const Failure& f, const std::string& host) {
  const auto m = message_of(f);
  nlohmann::json j = {{"host", f.host.empty() ? host : f.host},
                      {"local_rank", f.local_rank},
                      {"rank", f.rank},
                      {"pid", f.pid},
                      {"exit_code", f.exit_code},
                      {"signal", f.signal},
                      {"time_ns", std::chrono::duration_cast<std::chrono::nanoseconds>(time_of(f, m).time_since_epoch()).count()},
                      {"stopped", f.stopped},
                      {"error_file", f.error_file},
                      {"stderr_tail", f.stderr_tail},
                      {"traceback", f.traceback},
                      {"traceback_time_ns",
                       std::chrono::duration_cast<std::chrono::nanoseconds>(f.traceback_time.time_since_epoch()).count()},
                      {"killed_by", killer_id(f.killed_by)},
                      {"kill_reason", f.kill_reason},
                      {"no_root_cause", f.no_root_cause},
                      {"memory",
                       {{"oom_killed", f.memory.oom_killed},
                        {"how_known", f.memory.how_known},
                        {"kernel_line", f.memory.kernel_line},
                        {"cgroup", f.memory.cgroup},
                        {"limit", f.memory.limit},
                        {"limit_set_on", f.memory.limit_set_on},
                        {"peak", f.memory.peak},
                        {"peak_rss", f.memory.peak_rss},
                        {"peak_rss_of_children", f.memory.peak_rss_of_children},
                        {"own_peak_at_least", f.memory.own_peak_at_least},
                        {"shared_oom_kills", f.memory.shared_oom_kills},
                        {"child_oom_kills", f.memory.child_oom_kills},
                        {"missing", f.memory.missing}}},
                      {"fault", f.fault},
                      {"core_dumped", f.core_dumped},
                      {"core", f.core},
                      {"unkillable", f.unkillable},
                      {"wait_state", f.wait_state}};
  if (m) j["message"] = m->text;
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<Failure> from_record(const std::string& record) {
  auto j = nlohmann::json::parse(record, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  try {
    Failure f;
    f.host = j.value("host", "");
    f.local_rank = j.value("local_rank", 0);
    f.rank = j.value("rank", 0);
    f.pid = j.value("pid", 0);
    f.exit_code = j.value("exit_code", 1);
    f.signal = j.value("signal", 0);
    f.time = from_ns(j.value("time_ns", 0LL));
    f.stopped = j.value("stopped", false);
    f.error_file = j.value("error_file", "");
    f.message = j.value("message", "");
    f.stderr_tail = j.value("stderr_tail", std::vector<std::string>{});
    f.traceback = j.value("traceback", "");
    f.traceback_time = from_ns(j.value("traceback_time_ns", 0LL));
    f.killed_by = killer_from_id(j.value("killed_by", ""));
    f.kill_reason = j.value("kill_reason", "");
    f.no_root_cause = j.value("no_root_cause", std::vector<std::string>{});
    if (j.contains("memory") && j["memory"].is_object()) {
      const auto& m = j["memory"];
      f.memory.oom_killed = m.value("oom_killed", false);
      f.memory.how_known = m.value("how_known", "");
      f.memory.kernel_line = m.value("kernel_line", "");
      f.memory.cgroup = m.value("cgroup", "");
      f.memory.limit = m.value("limit", -1LL);
      f.memory.limit_set_on = m.value("limit_set_on", "");
      f.memory.peak = m.value("peak", -1LL);
      f.memory.peak_rss = m.value("peak_rss", -1LL);
      f.memory.peak_rss_of_children = m.value("peak_rss_of_children", false);
      f.memory.own_peak_at_least = m.value("own_peak_at_least", -1LL);
      f.memory.shared_oom_kills = m.value("shared_oom_kills", 0LL);
      f.memory.child_oom_kills = m.value("child_oom_kills", 0LL);
      f.memory.missing = m.value("missing", "");
    }
    f.fault = j.value("fault", "");
    f.core_dumped = j.value("core_dumped", false);
    f.core = j.value("core", "");
    f.unkillable = j.value("unkillable", false);
    f.wait_state = j.value("wait_state", "");
    return f;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

std::chrono::system_clock::time_point failure_time(const Failure& f) {
  return time_of(f, message_of(f));
}

std::string failure_message(const Failure& f) {
  const auto m = message_of(f);
  for (const std::string* text : {m ? &m->text : nullptr, &f.traceback}) {
    if (text == nullptr || text->empty()) continue;
    if (auto tb = parse_traceback(*text); tb && (!tb->exception.empty() || !tb->frames.empty()))
      return describe_traceback(*tb);
  }
  return m ? first_line_of(m->text) : "";
}

bool communication_error(const Failure& f) {
  const auto m = message_of(f);
  if (m && mentions_communication_error(m->text)) return true;
  if (mentions_communication_error(f.traceback)) return true;
  return std::any_of(f.stderr_tail.begin(), f.stderr_tail.end(),
                     [](const std::string& line) { return mentions_communication_error(line); });
}

bool only_communication_errors(const std::vector<std::string>& records) {
  return !records.empty() && std::all_of(records.begin(), records.end(), [](const std::string& record) {
    const auto f = from_record(record);
    return f && communication_error(*f);
  });
}

bool killed_on_a_verdict(const Failure& f) {
  return f.killed_by == Killer::hang || f.killed_by == Killer::file_timer || f.killed_by == Killer::fault_injection;
}

void order_by_time(std::vector<Failure>& failures) {
  std::vector<std::pair<std::chrono::system_clock::time_point, size_t>> keys;
  for (size_t i = 0; i < failures.size(); ++i) keys.emplace_back(failure_time(failures[i]), i);
  std::stable_sort(keys.begin(), keys.end());
  std::vector<Failure> sorted;
  for (const auto& [t, i] : keys) sorted.push_back(failures[i]);
  const auto to_front = [&sorted](size_t i) {
    std::rotate(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(i),
                sorted.begin() + static_cast<std::ptrdiff_t>(i) + 1);
  };
  const auto blames_a_rank = [](const Failure& f) { return killed_on_a_verdict(f) && f.no_root_cause.empty(); };
  // The first verdict's kill is what the failures just before it followed;
  // one that blamed a rank before one that killed a rank only to stop a
  // hung job (no_root_cause), which names no cause: another node's verdict
  // that blamed a rank then goes first, wherever it is in the list.
  size_t pick = sorted.size();
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (failure_time(sorted[i]) - failure_time(sorted.front()) > kConsequenceWindow) break;
    if (!killed_on_a_verdict(sorted[i])) continue;
    if (pick == sorted.size()) pick = i;
    if (blames_a_rank(sorted[i])) {
      pick = i;
      break;
    }
  }
  if (pick < sorted.size() && !blames_a_rank(sorted[pick]))
    for (size_t i = 0; i < sorted.size(); ++i)
      if (blames_a_rank(sorted[i])) {
        pick = i;
        break;
      }
  if (pick < sorted.size()) {
    to_front(pick);
    failures = std::move(sorted);
    return;
  }
  // A communication error follows a peer's failure: the first failure that
  // is not one, landing a little later, is what it followed.
  if (!sorted.empty() && communication_error(sorted.front())) {
    const auto first = failure_time(sorted.front());
    for (size_t i = 1; i < sorted.size(); ++i) {
      if (failure_time(sorted[i]) - first > kConsequenceWindow) break;
      if (communication_error(sorted[i])) continue;
      to_front(i);
      break;
    }
  }
  failures = std::move(sorted);
}

std::vector<Failure> job_failures(const std::vector<std::string>& records, const std::vector<Failure>& local,
                                  const std::string& host) {
  std::vector<Failure> all;
  for (const std::string& record : records)
    if (auto f = from_record(record)) all.push_back(*f);
  const size_t published = all.size();
  for (const Failure& f : local) {
    auto same = [&](const Failure& r) { return r.pid == f.pid && r.rank == f.rank && (r.host.empty() || r.host == host); };
    if (std::none_of(all.begin(), all.begin() + published, same)) all.push_back(f);
  }
  // The first record published is the failure seen first; one that was
  // still tearing down then may have happened earlier.
  order_by_time(all);
  return all;
}

}  // namespace cxxrun::agent
