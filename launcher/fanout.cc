#include "launcher/fanout.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <memory>
#include <optional>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/exit_codes.h"
#include "agent/process/private_files.h"
#include "agent/process/spawn.h"
#include "launcher/job_exit_code.h"
#include "launcher/launcher_link.h"
#include "launcher/shell_words.h"
#include "launcher/values.h"

extern char** environ;

namespace cxxrun::launcher {
namespace {

namespace asio = boost::asio;
using Stream = asio::posix::stream_descriptor;

// After its --rsh exited, how long an agent's output may take to end (a
// process the rsh left behind may hold the pipes).
constexpr std::chrono::seconds kDrain{2};
// A line longer than this is written out in pieces of this size.
constexpr size_t kMaxLine = 64 * 1024;
// Lines kept from an agent that has not said it is ready: the last is the
// reason an unreachable host gives.
constexpr size_t kHeldLines = 50;

void write_all(int fd, std::string_view text) {
  while (!text.empty()) {
    const ssize_t n = ::write(fd, text.data(), text.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    text.remove_prefix(static_cast<size_t>(n));
  }
}

std::string status_words(int status) {
  if (WIFSIGNALED(status)) return fmt::format("was killed by {}", control_line(WTERMSIG(status)));
  return fmt::format("exited {}", WEXITSTATUS(status));
}

class Fanout {
 public:
  explicit Fanout(const FanoutPlan& plan)
      : plan_(plan), signals_(io_, SIGINT, SIGTERM, SIGHUP), children_(io_, SIGCHLD) {
    signals_.add(SIGQUIT);
  }

  int run() {
    ::signal(SIGPIPE, SIG_IGN);  // an agent gone: EPIPE on its stdin, not our death
    spdlog::info("starting {} agent{} through '{}': rendezvous at {}, run id {}, --nnodes={}:{}", plan_.hosts.size(),
                 plan_.hosts.size() == 1 ? "" : "s", shell_command(plan_.rsh), plan_.endpoint, plan_.run_id,
                 plan_.min_nodes, plan_.max_nodes);
    if (!plan_.token_out.empty()) {
      // Before any host starts: a token nobody could keep would leave a job
      // that no cxxrunctl can reach.
      std::string why_not;
      if (!agent::write_private_file(plan_.token_out, plan_.token + "\n", false, why_not)) {
        spdlog::error("--token-out={}: cannot write the job's token: {}", plan_.token_out, why_not);
        return agent::exit_code::usage;
      }
      spdlog::info("the job's token is in {} (cxxrunctl --rdzv-endpoint={} --rdzv-id={} --token-file={} status)",
                   plan_.token_out, plan_.endpoint, plan_.run_id, plan_.token_out);
    }
    wait_signal();
    wait_child();
    for (size_t i = 0; i < plan_.hosts.size(); ++i) agents_.push_back(std::make_unique<Agent>(i, plan_.hosts[i].name));
    for (auto& a : agents_) start(*a);
    io_.run();
    std::vector<HostOutcome> outcomes;
    for (const auto& a : agents_) outcomes.push_back(a->outcome);
    const int code = job_exit_code(outcomes, launcher_signal_, stopped_unreachable_);
    spdlog::info("every agent has ended; exiting with code {}", code);
    return code;
  }

 private:
  struct Held {
    bool err;
    std::string line;
  };
  struct Agent {
    Agent(size_t i, std::string n) : index(i), name(std::move(n)) {}
    size_t index;
    std::string name;
    pid_t pid = -1;
    std::string start_error;
    std::unique_ptr<Stream> in, out, err;
    std::array<char, 16384> out_buf{}, err_buf{};
    std::string out_pending, err_pending;
    std::deque<Held> held;
    bool ready = false;
    std::optional<int> exit_marker;
    bool reaped = false;
    int status = 0;
    bool killed_by_us = false;
    bool finished = false;
    bool writing = false;
    std::deque<std::string> writes;
    std::unique_ptr<asio::steady_timer> drain, stop_deadline;
    HostOutcome outcome{HostOutcome::Kind::lost, 0};
  };

  void start(Agent& a) {
    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      throw std::runtime_error(std::string("cannot make pipes for the agents: ") + std::strerror(errno));
    agent::SpawnRequest request;
    request.argv = rsh_argv(plan_, a.index);
    for (char** e = environ; *e != nullptr; ++e) request.envp.emplace_back(*e);
    request.stdin_fd = in[0];
    request.stdout_fd = out[1];
    request.stderr_fd = err[1];
    try {
      a.pid = agent::spawn_process(request);
    } catch (const std::exception& e) {
      a.start_error = e.what();
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    a.in = std::make_unique<Stream>(io_, in[1]);
    a.out = std::make_unique<Stream>(io_, out[0]);
    a.err = std::make_unique<Stream>(io_, err[0]);
    if (!a.start_error.empty()) {
      a.in->close();
      a.out->close();
      a.err->close();
      return asio::post(io_, [this, &a] { finish(a); });
    }
    send(a, plan_.token + "\n");
    read(a, false);
    read(a, true);
  }

  // --- output --------------------------------------------------------------

  void read(Agent& a, bool err) {
    Stream& s = err ? *a.err : *a.out;
    auto& buf = err ? a.err_buf : a.out_buf;
    s.async_read_some(asio::buffer(buf), [this, &a, err](const boost::system::error_code& ec, size_t n) {
      std::string& pending = err ? a.err_pending : a.out_pending;
      if (ec) {
        if (!pending.empty()) on_line(a, err, std::exchange(pending, {}));
        Stream& s = err ? *a.err : *a.out;
        if (s.is_open()) s.close();
        return maybe_finish(a);
      }
      pending.append((err ? a.err_buf : a.out_buf).data(), n);
      size_t from = 0;
      for (size_t nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n', from)) {
        on_line(a, err, pending.substr(from, nl - from));
        from = nl + 1;
      }
      pending.erase(0, from);
      while (pending.size() >= kMaxLine) {
        on_line(a, err, pending.substr(0, kMaxLine));
        pending.erase(0, kMaxLine);
      }
      read(a, err);
    });
  }

  void on_line(Agent& a, bool err, std::string line) {
    if (!err && line.starts_with(kReady)) {
      a.ready = true;
      for (const Held& h : a.held) emit(a, h.err, h.line);
      a.held.clear();
      return;
    }
    if (!err && line.starts_with(kExited)) {
      if (auto code = integer_of(std::string_view(line).substr(kExited.size()))) a.exit_marker = static_cast<int>(*code);
      return;
    }
    if (!a.ready) {
      // The rsh's own words (a refused connection, a missing program) are the
      // reason of the one line an unreachable host gets.
      a.held.push_back({err, std::move(line)});
      if (a.held.size() > kHeldLines) a.held.pop_front();
      return;
    }
    emit(a, err, line);
  }

  // One write per line: lines of different hosts never tear.
  void emit(const Agent& a, bool err, std::string_view line) {
    write_all(err ? STDERR_FILENO : STDOUT_FILENO, fmt::format("[{}] {}\n", a.name, line));
  }

  // --- stdin: the token, then signals ---------------------------------------

  void send(Agent& a, std::string text) {
    if (a.finished || !a.in || !a.in->is_open()) return;
    a.writes.push_back(std::move(text));
    if (!a.writing) write_next(a);
  }

  void write_next(Agent& a) {
    if (a.writes.empty() || !a.in->is_open()) {
      a.writing = false;
      return;
    }
    a.writing = true;
    asio::async_write(*a.in, asio::buffer(a.writes.front()), [this, &a](const boost::system::error_code& ec, size_t) {
      a.writes.pop_front();
      if (ec) {  // the agent is gone; its exit says the rest
        a.writes.clear();
        if (a.in->is_open()) a.in->close();
      }
      write_next(a);
    });
  }

  void tell_all(int sig) {
    for (auto& a : agents_) {
      if (a->finished) continue;
      send(*a, control_line(sig) + "\n");
      if (!a->stop_deadline) {
        a->stop_deadline = std::make_unique<asio::steady_timer>(
            io_, std::chrono::milliseconds(static_cast<long long>(plan_.stop_deadline_s * 1000)));
        a->stop_deadline->async_wait([this, &a = *a](const boost::system::error_code& ec) {
          if (ec || a.finished) return;
          spdlog::error("host {}: its agent did not stop within {} s of being told to; killing its --rsh", a.name,
                        plan_.stop_deadline_s);
          kill_rsh(a);
        });
      }
    }
  }

  void kill_rsh(Agent& a) {
    if (a.pid > 0 && !a.reaped) {
      a.killed_by_us = true;
      ::kill(a.pid, SIGKILL);
    }
  }

  // --- signals and exits -----------------------------------------------------

  void wait_signal() {
    signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
      if (ec) return;
      on_signal(sig);
      wait_signal();
    });
  }

  void on_signal(int sig) {
    ++signals_got_;
    if (signals_got_ == 1) {
      launcher_signal_ = sig;
      stopping_ = true;
      spdlog::warn("received {}: stopping the job on every host", control_line(sig));
      tell_all(sig);
    } else if (signals_got_ == 2) {
      spdlog::warn("received {} again: the agents kill their workers now", control_line(sig));
      tell_all(sig);
    } else {
      spdlog::warn("received {} a third time: killing every --rsh", control_line(sig));
      for (auto& a : agents_) kill_rsh(*a);
    }
  }

  void wait_child() {
    children_.async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;
      reap();
      wait_child();
    });
  }

  void reap() {
    for (auto& a : agents_) {
      if (a->pid <= 0 || a->reaped) continue;
      int status = 0;
      pid_t got;
      do got = ::waitpid(a->pid, &status, WNOHANG);
      while (got < 0 && errno == EINTR);
      if (got != a->pid) continue;
      a->reaped = true;
      a->status = status;
      a->drain = std::make_unique<asio::steady_timer>(io_, kDrain);
      a->drain->async_wait([this, &a = *a](const boost::system::error_code& ec) {
        if (ec || a.finished) return;
        if (a.out->is_open()) a.out->close();  // cancels its read, which then finishes it
        if (a.err->is_open()) a.err->close();
        maybe_finish(a);
      });
      maybe_finish(*a);
    }
  }

  void maybe_finish(Agent& a) {
    if (a.finished || !a.reaped || a.out->is_open() || a.err->is_open()) return;
    finish(a);
  }

  void finish(Agent& a) {
    a.finished = true;
    for (auto* t : {a.drain.get(), a.stop_deadline.get()})
      if (t) t->cancel();
    if (a.in->is_open()) a.in->close();
    a.outcome = classify(a);
    if (a.outcome.kind == HostOutcome::Kind::unreachable) {
      unreachable(a);
    } else {
      for (const Held& h : a.held) emit(a, h.err, h.line);  // e.g. a remote usage error
      if (a.outcome.kind == HostOutcome::Kind::lost)
        spdlog::error("host {}: lost its agent: its --rsh {} without the agent's exit code (the connection dropped, "
                      "or the agent was killed)",
                      a.name, status_words(a.status));
      else
        spdlog::info("host {}: its agent exited with code {}", a.name, a.outcome.code);
    }
    a.held.clear();
    bool all = true;
    for (const auto& other : agents_) all = all && other->finished;
    if (all) {
      signals_.cancel();
      children_.cancel();
      io_.stop();
    }
  }

  HostOutcome classify(const Agent& a) const {
    using Kind = HostOutcome::Kind;
    if (!a.start_error.empty()) return {Kind::unreachable, 0};
    if (a.exit_marker) return {Kind::exited, *a.exit_marker};
    if (a.killed_by_us) return {Kind::lost, 0};
    if (a.ready) {
      // No exit line: the agent ended without main's return (std::_Exit
      // while re-joining), or was killed, or its connection dropped. ssh
      // passes a command's own code through and says 255 for the rest.
      if (WIFEXITED(a.status) && WEXITSTATUS(a.status) != 255) return {Kind::exited, WEXITSTATUS(a.status)};
      return {Kind::lost, 0};
    }
    // Never ready: ssh's own failure (255), a shell that found no cxxrun
    // (127) or could not run it (126), or a signal; any other code is the
    // remote cxxrun's own (a usage error before it read the token).
    if (WIFSIGNALED(a.status)) return {Kind::unreachable, 0};
    const int code = WEXITSTATUS(a.status);
    if (code == 255 || code == 126 || code == 127) return {Kind::unreachable, 0};
    return {Kind::exited, code};
  }

  void unreachable(const Agent& a) {
    const std::vector<std::string> argv = rsh_argv(plan_, a.index);
    // The rsh, the host and the remote program: the rest is options.
    const size_t shown = plan_.rsh.size() + 2;
    std::string command = shell_command(std::vector<std::string>(argv.begin(), argv.begin() + shown));
    if (argv.size() > shown) command += " ...";
    std::string why = a.start_error.empty() ? status_words(a.status) : "could not start: " + a.start_error;
    if (a.start_error.empty() && !WIFSIGNALED(a.status) && WEXITSTATUS(a.status) == 127)
      why += " (no such program on the host: --remote-cxxrun names the path there)";
    for (auto it = a.held.rbegin(); it != a.held.rend(); ++it)
      if (!std::string_view(it->line).empty()) {
        why += ": " + it->line;
        break;
      }
    write_all(STDERR_FILENO, fmt::format("cxxrun: host {} unreachable: '{}' {}\n", a.name, command, why));
    if (stopping_) return;
    int left = 0;
    for (const auto& other : agents_)
      if (!(other->finished && other->outcome.kind == HostOutcome::Kind::unreachable)) ++left;
    if (plan_.first_host_is_store && a.index == 0) {
      spdlog::error("host {} was to host the rendezvous store: stopping the job on every host", a.name);
    } else if (left < plan_.min_nodes) {
      spdlog::error("{} host{} left, fewer than --nnodes' minimum {}: stopping the job on every host", left,
                    left == 1 ? "" : "s", plan_.min_nodes);
    } else {
      spdlog::warn("the job goes on with the other {} host{} (--nnodes' minimum is {})", left, left == 1 ? "" : "s",
                   plan_.min_nodes);
      return;
    }
    stopping_ = true;
    stopped_unreachable_ = true;
    tell_all(SIGTERM);
  }

  const FanoutPlan& plan_;
  asio::io_context io_;
  asio::signal_set signals_;
  asio::signal_set children_;
  std::vector<std::unique_ptr<Agent>> agents_;
  int signals_got_ = 0;
  int launcher_signal_ = 0;
  bool stopping_ = false;
  bool stopped_unreachable_ = false;
};

}  // namespace

int run_fanout(const FanoutPlan& plan) { return Fanout(plan).run(); }

}  // namespace cxxrun::launcher
