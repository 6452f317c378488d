#include "agent/warm/zygote.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <stdexcept>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "agent/forensics/failure.h"
#include "agent/process/private_files.h"
#include "agent/process/stale_temp_dirs.h"
#include "agent/python/hook.h"
#include "agent/python/sources.h"

namespace cxxrun::agent {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A fork of an interpreter that imported torch takes about 10 ms, but a
// request may arrive while the zygote imports what it preloads when idle
// (agent/python/zygote.py, seconds); this only bounds a zygote that stopped
// answering.
constexpr auto kForkDeadline = 30s;
// The ready line is sent in one write once poll() said it is there.
constexpr auto kLineDeadline = 1s;

// `python -c` put "" (the agent's cwd) first on sys.path, unless
// PYTHONSAFEPATH: gone before the zygote imports anything, so that no module
// someone left in that directory runs in it, and each worker gets its own
// first entry (agent/python/zygote.py, _run).
constexpr const char* kBootstrap =
    "import sys; getattr(sys.flags, 'safe_path', 0) or sys.path.pop(0); "
    "exec(compile(sys.stdin.read(), 'cxxrun-forkserver', 'exec'))";

// The zygote's sitecustomize is agent/python/zygote_sitecustomize.py
// (kZygoteSitecustomizeSource): site then runs neither the user's nor
// usercustomize in it (agent/python/zygote.py runs both in each worker, _customize).
// Names the directory to the zygote, which takes it off sys.path.
constexpr const char* kOwnSiteVariable = "CXXRUN_FORKSERVER_SITE";

// A private directory (0700, a name no one else can take: mkdtemp) with the
// zygote's sitecustomize in it, in a temporary directory where no other user
// can move it aside and put their own in its place before the zygote runs it
// (safe_temp_base: not a $TMPDIR others can write without the sticky bit).
std::string make_own_site() {
  const std::string base = safe_temp_base();
  if (base.empty())
    throw std::runtime_error("no temporary directory that only this user can change ($TMPDIR, /tmp, /dev/shm)");
  std::string dir = owned_temp_template(base, kForkserverDirPrefix);
  if (!mkdtemp(dir.data()))
    throw std::runtime_error("cannot create a directory in " + dir.substr(0, dir.rfind('/')) + ": " + strerror(errno));
  const std::string file = dir + "/sitecustomize.py";
  const int fd = open(file.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  const size_t length = strlen(kZygoteSitecustomizeSource);
  const bool written = fd >= 0 && write(fd, kZygoteSitecustomizeSource, length) == static_cast<ssize_t>(length);
  if (fd >= 0) close(fd);
  if (!written) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    throw std::runtime_error("cannot write " + file);
  }
  return dir;
}

// `envp` with `dir` first on its PYTHONPATH and named by kOwnSiteVariable.
std::vector<std::string> with_own_site(const std::vector<std::string>& envp, const std::string& dir) {
  std::vector<std::string> out;
  std::string python_path;
  const std::string path_prefix = "PYTHONPATH=", own_prefix = std::string(kOwnSiteVariable) + "=";
  for (const auto& e : envp) {
    if (e.rfind(path_prefix, 0) == 0) python_path = e.substr(path_prefix.size());
    else if (e.rfind(own_prefix, 0) != 0) out.push_back(e);
  }
  out.push_back(path_prefix + python_path_with(dir, python_path));
  out.push_back(own_prefix + dir);
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ",") + s;
  return out;
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) return "was killed by " + signal_name(WTERMSIG(status));
  return "exited with code " + std::to_string(WEXITSTATUS(status));
}

// Sends `text` with `fds` attached to its first byte.
bool send_with_fds(int sock, const std::string& text, const std::vector<int>& fds) {
  char control[CMSG_SPACE(sizeof(int) * 8)] = {};
  iovec iov{const_cast<char*>(text.data()), text.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
  memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
  ssize_t n;
  do n = sendmsg(sock, &msg, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n <= 0) return false;
  // The rest of a long environment; SO_SNDTIMEO bounds each write.
  for (size_t done = static_cast<size_t>(n); done < text.size();) {
    n = send(sock, text.data() + done, text.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// The worker's stdin is the agent's; a closed one becomes /dev/null, since
// a closed descriptor cannot be sent.
int agent_stdin() {
  if (fcntl(STDIN_FILENO, F_GETFD) >= 0) return STDIN_FILENO;
  static const int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return null_fd;
}

}  // namespace

Zygote::Zygote(const ForkserverOptions& o, const std::vector<std::string>& envp, const CgroupTarget* cgroup,
               bool idle)
    : started_(Clock::now()) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    throw std::runtime_error(std::string("cannot create the forkserver's socket: ") + strerror(errno));
  fd_ = pair[0];
  const timeval send_limit{std::chrono::duration_cast<std::chrono::seconds>(kForkDeadline).count(), 0};
  setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &send_limit, sizeof send_limit);
  // The source comes on stdin, so that `ps` shows forked workers (which
  // keep the zygote's command line) as this short bootstrap, not 300 lines.
  int source[2];
  if (pipe2(source, O_CLOEXEC) != 0) {
    close(pair[0]), close(pair[1]);
    throw std::runtime_error(std::string("cannot create a pipe: ") + strerror(errno));
  }
  const size_t length = strlen(kZygoteSource);
  // Fits the pipe's 64 KiB buffer: written whole before the zygote runs.
  const bool written = write(source[1], kZygoteSource, length) == static_cast<ssize_t>(length);
  close(source[1]);
  if (!written) {
    close(source[0]), close(pair[0]), close(pair[1]);
    throw std::runtime_error("cannot hand the forkserver its source");
  }
  SpawnRequest r;
  r.stdin_fd = source[0];
  r.argv = {o.python, "-u", "-c", kBootstrap, std::to_string(getpid()), o.preload_given ? "1" : "0",
            join(o.preload), idle ? "1" : "0"};
  try {
    own_site_ = make_own_site();
  } catch (...) {
    close(pair[0]), close(pair[1]), close(source[0]);
    fd_ = -1;
    throw;
  }
  r.envp = with_own_site(envp, own_site_);
  r.stdout_fd = STDOUT_FILENO;
  r.stderr_fd = STDERR_FILENO;
  r.cgroup = cgroup;
  r.pass_fd = pair[1];
  r.idle = idle;
  try {
    pid_ = spawn_process(r);
  } catch (...) {
    close(pair[0]), close(pair[1]), close(source[0]);
    fd_ = -1;
    std::error_code ec;
    std::filesystem::remove_all(own_site_, ec);
    throw;
  }
  close(pair[1]);
  close(source[0]);
  spdlog::info("forkserver: started {} (pid {}), preloading {}", o.python, pid_,
               o.preload.empty() ? "nothing" : join(o.preload));
}

Zygote::~Zygote() {
  if (fd_ >= 0) close(fd_);
  if (state_ != State::gone) kill(pid_, SIGKILL);
  std::error_code ec;
  if (!own_site_.empty()) std::filesystem::remove_all(own_site_, ec);
}

void Zygote::read_ready() {
  if (state_ != State::preloading) return;
  // The loop's wait may have made it non-blocking; requests need it blocking.
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
  const std::string line = read_line(kLineDeadline);
  if (line.empty()) return;
  const auto ready = nlohmann::json::parse(line, nullptr, false);
  if (ready.is_discarded() || !ready.contains("ready")) return give_up("its first message was not 'ready': " + line);
  state_ = State::ready;
  const double seconds = std::chrono::duration<double>(Clock::now() - started_).count();
  const auto loaded = ready.value("preloaded", std::vector<std::string>{});
  const auto failed = ready.value("failed", std::vector<std::string>{});
  spdlog::info("forkserver: ready in {:.2f} s (preloaded: {}{}{})", seconds, loaded.empty() ? "nothing" : join(loaded),
               failed.empty() ? "" : "; could not import: ", join(failed));
}

pid_t Zygote::fork_worker(const Fork& f, std::string& why) {
  if (state_ != State::ready) {
    why = state_ == State::gone ? why_gone_ : "the forkserver is still preloading";
    return -1;
  }
  nlohmann::json request{{"argv", f.argv}, {"env", f.envp}, {"cwd", f.cwd}};
  if (f.binding) {
    request["cpus"] = f.binding->cpus;
    // set_mempolicy's number differs by architecture, and Python has no
    // name for it: the agent's build knows it.
    if (f.binding->memory_node)
      request["memory"] = {{"node", *f.binding->memory_node}, {"set_mempolicy", SYS_set_mempolicy}};
  }
  std::vector<int> fds{agent_stdin(), f.stdout_fd, f.stderr_fd};
  if (f.cgroup_procs >= 0) fds.push_back(f.cgroup_procs);
  if (!send_with_fds(fd_, request.dump() + "\n", fds)) {
    give_up(std::string("cannot send it a request: ") + strerror(errno));
    why = why_gone_;
    return -1;
  }
  const std::string line = read_line(kForkDeadline);
  if (line.empty()) {
    why = why_gone_;
    return -1;
  }
  const auto reply = nlohmann::json::parse(line, nullptr, false);
  if (!reply.is_discarded() && reply.contains("pid") && reply["pid"].is_number_integer())
    return reply["pid"].get<pid_t>();
  if (!reply.is_discarded() && reply.contains("unsafe")) {
    why = reply["unsafe"].get<std::string>();
    return -1;
  }
  give_up("it answered '" + line + "'");
  why = why_gone_;
  return -1;
}

std::string Zygote::read_line(std::chrono::milliseconds deadline) {
  const auto until = Clock::now() + deadline;
  for (;;) {
    if (const auto nl = buffer_.find('\n'); nl != std::string::npos) {
      std::string line = buffer_.substr(0, nl);
      buffer_.erase(0, nl + 1);
      return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    pollfd p{fd_, POLLIN, 0};
    const int ready = left.count() > 0 ? poll(&p, 1, static_cast<int>(left.count())) : 0;
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) {
      give_up("it did not answer within " + std::to_string(deadline.count()) + " ms");
      return "";
    }
    char buf[4096];
    const ssize_t n = read(fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      give_up("it closed its socket");
      return "";
    }
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

void Zygote::exited(int status) {
  if (state_ == State::gone) return;
  state_ = State::gone;
  why_gone_ = "the forkserver " + describe_status(status);
  spdlog::warn("{} (pid {}); workers start by exec from now on", why_gone_, pid_);
}

void Zygote::give_up(const std::string& why) {
  if (state_ == State::gone) return;
  kill(pid_, SIGKILL);
  state_ = State::gone;
  why_gone_ = "the forkserver failed: " + why;
  spdlog::warn("{} (pid {}); it is stopped and workers start by exec from now on", why_gone_, pid_);
}

}  // namespace cxxrun::agent
