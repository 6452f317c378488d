#include "agent/hang/stack_dump.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <boost/asio/post.hpp>
#include <spdlog/spdlog.h>

#include "agent/workers/log_dir.h"
#include "agent/process/private_files.h"
#include "agent/hang/stack_hook.h"
#include "common/env_names.h"

namespace cxxrun::agent {
namespace {

namespace asio = boost::asio;

constexpr std::chrono::milliseconds kPoll{50};
// A dump is complete once its file stopped growing for this many polls.
constexpr int kStablePolls = 2;

off_t size_of(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 ? st.st_size : 0;
}

std::string read_range(const std::string& path, off_t from, off_t to) {
  std::ifstream in(path, std::ios::binary);
  if (!in || to <= from) return "";
  in.seekg(from);
  std::string text(static_cast<size_t>(to - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A signalled hook that wrote nothing by then was not the handler that ran
// (a program that set its own natively): the stack is read from outside.
constexpr std::chrono::milliseconds kSilentHook{800};

// A new 0600 file: the hang bundle is written only into a directory made for
// it, and never through a link.
bool write_fresh(const std::string& path, const std::string& text) {
  std::string why_not;
  if (write_private_file(path, text, true, why_not)) return true;
  spdlog::warn("hang stacks: {}", why_not);
  return false;
}

// `text` as one shell word.
std::string shell_word(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// eu-stack's view of `pid`, bounded: it runs on a thread of its own. Both
// programs are the ones PATH names in directories no other user can change
// (trusted_program): never one planted in the agent's cwd.
std::string native_stack(pid_t pid) {
  const std::string timeout = trusted_program("timeout"), eu_stack = trusted_program("eu-stack");
  if (eu_stack.empty()) return "eu-stack not found (Debian: apt install elfutils)\n";
  if (timeout.empty()) return "timeout not found (coreutils): eu-stack not run\n";
  const std::string command =
      shell_word(timeout) + " -s KILL 2 " + shell_word(eu_stack) + " -m -s -p " + std::to_string(pid) + " 2>&1";
  FILE* p = popen(command.c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0 && out.size() < (1 << 20)) out.append(buf, n);
  const int status = pclose(p);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 127) return "eu-stack not found (Debian: apt install elfutils)\n";
  return out;
}

// A process a signal stopped (SIGSTOP, SIGTSTP): /proc/<pid>/stat's state
// is 'T'. A signal sent to it stays pending until it is continued, so its
// hook cannot dump; eu-stack can read it where it stands, and its ptrace
// detach leaves it stopped (a later SIGKILL still ends it).
bool stopped_by_signal(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  const size_t end = stat.rfind(')');  // the name may hold spaces and ')'
  return end != std::string::npos && end + 2 < stat.size() && stat[end + 2] == 'T';
}

}  // namespace

int stack_signal() { return SIGRTMIN + 3; }

struct StackDump::Pending {
  struct Each {
    Target target;
    std::string file;  // the hook's stacks.txt; "" for a stack read from outside
    off_t start = 0;
    off_t last = 0;
    int stable = 0;
    bool done = false;
    std::string text;
  };
  struct Waiter {
    Done done;
    bool bundle = true;  // a verdict's: it is told where the bundle went
  };
  int attempt = 0;
  bool bundle = true;  // some waiter is a verdict's: the stacks go to a hang bundle
  std::vector<Each> each;
  std::vector<Waiter> waiters;
  std::chrono::steady_clock::time_point signalled;
  std::chrono::steady_clock::time_point deadline;
  std::vector<std::thread> readers;
};

StackDump::StackDump(asio::io_context& io, const LogDir& logs) : io_(io), logs_(logs), timer_(io) {}

StackDump::~StackDump() {
  if (pending_)
    for (auto& t : pending_->readers) t.join();
}

void StackDump::add_env(EnvMap& env, int attempt, int local_rank) const {
  if (!logs_.enabled()) return;
  env[env::kStackFile] = logs_.file(attempt, local_rank, "stacks.txt");
  env[env::kStackSignal] = std::to_string(stack_signal());
  // torch's NCCL flight recorder: the last collectives of every rank, dumped
  // when NCCL's own watchdog times out; the user's settings win.
  const std::pair<const char*, std::string> recorder[] = {
      {"TORCH_NCCL_TRACE_BUFFER_SIZE", "2000"},
      {"TORCH_NCCL_DUMP_ON_TIMEOUT", "1"},
      {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", logs_.file(attempt, local_rank, kNcclTracePrefix)}};
  for (const auto& [name, value] : recorder)
    if (!env.count(name)) env[name] = value;
}

pid_t StackDump::hook_to_signal(const Target& t, const std::string& file) {
  if (file.empty()) return 0;
  for (const HookRegistration& r : hook_registrations(read_all(file))) {
    const std::string why_not = why_not_signal(r, t.pid, file);
    if (why_not.empty()) return r.pid;
    spdlog::debug("hang stacks: rank {}: not signalling its hook: {}", t.rank, why_not);
  }
  return 0;
}

void StackDump::read_from_outside(size_t index, pid_t pid) {
  // On a thread: eu-stack stops the process a moment.
  std::weak_ptr<Pending> weak = pending_;
  pending_->readers.emplace_back([this, weak, index, pid] {
    std::string text = native_stack(pid);
    asio::post(io_, [this, weak, index, text = std::move(text)] {
      auto live = weak.lock();
      if (!live || live != pending_ || index >= live->each.size() || live->each[index].done) return;
      live->each[index].text = text;
      live->each[index].done = true;
      poll();
    });
  });
}

void StackDump::collect(int attempt, const std::vector<Target>& targets, Done done, bool bundle) {
  if (pending_ && !pending_->waiters.empty()) {
    pending_->waiters.push_back({std::move(done), bundle});
    pending_->bundle = pending_->bundle || bundle;
    return;
  }
  if (pending_)
    for (auto& t : pending_->readers) t.join();
  pending_ = std::make_shared<Pending>();
  Pending& p = *pending_;
  p.attempt = attempt;
  p.bundle = bundle;
  p.waiters.push_back({std::move(done), bundle});
  p.signalled = std::chrono::steady_clock::now();
  p.deadline = p.signalled + kStackDeadline;
  for (const Target& t : targets) {
    Pending::Each e;
    e.target = t;
    const std::string file = logs_.file(attempt, t.local_rank, "stacks.txt");
    pid_t python = hook_to_signal(t, file);
    // A stopped worker is read from outside: the process that would run
    // the hook, or the worker itself.
    pid_t outside = t.pid;
    if (python > 0 && stopped_by_signal(python)) {
      spdlog::debug("hang stacks: rank {}: pid {} is stopped; reading its stack from outside", t.rank, python);
      outside = python;
      python = 0;
    }
    if (python > 0) {
      e.file = file;
      e.start = e.last = size_of(file);
    }
    p.each.push_back(std::move(e));
    if (python > 0)
      kill(python, stack_signal());
    else
      read_from_outside(p.each.size() - 1, outside);
  }
  timer_.expires_after(kPoll);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) poll();
  });
}

void StackDump::poll() {
  if (!pending_ || pending_->waiters.empty()) return;
  Pending& p = *pending_;
  const auto now_time = std::chrono::steady_clock::now();
  bool all = true;
  for (size_t i = 0; i < p.each.size(); ++i) {
    auto& e = p.each[i];
    if (e.done) continue;
    if (!e.file.empty()) {
      const off_t now = size_of(e.file);
      if (now > e.start && now == e.last && ++e.stable >= kStablePolls) {
        e.text = read_range(e.file, e.start, now);
        e.done = true;
        continue;
      }
      if (now != e.last) e.stable = 0;
      e.last = now;
      if (now == e.start && now_time - p.signalled >= kSilentHook) {
        spdlog::debug("hang stacks: rank {}: its hook wrote nothing; reading its stack from outside", e.target.rank);
        e.file.clear();
        read_from_outside(i, e.target.pid);
      }
    }
    all = false;
  }
  if (all || now_time >= p.deadline) return finish();
  timer_.expires_after(kPoll);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) poll();
  });
}

void StackDump::finish() {
  timer_.cancel();
  Pending& p = *pending_;
  std::map<int, std::string> stacks;
  for (auto& e : p.each) {
    if (!e.done && !e.file.empty()) e.text = read_range(e.file, e.start, size_of(e.file));
    e.done = true;
    stacks[e.target.rank] = e.text;
  }
  std::vector<Pending::Waiter> waiters = std::move(p.waiters);
  p.waiters.clear();
  const std::string bundle = p.bundle ? write_bundle(p.attempt, stacks, p) : "";
  for (auto& w : waiters) w.done(stacks, w.bundle ? bundle : "");
}

std::string StackDump::write_bundle(int attempt, const std::map<int, std::string>& stacks, const Pending& p) {
  if (!logs_.enabled()) return "";
  // A fresh directory: a name already taken (by anything, a planted link
  // included) is passed over for the next.
  const std::string attempt_dir = logs_.attempt_file(attempt, "");
  std::string bundle;
  for (int tries = 0; tries < 100 && bundle.empty(); ++tries) {
    const std::string dir = attempt_dir + "hang-" + std::to_string(hangs_++);
    if (make_private_dir(dir)) bundle = dir;
    else if (errno != EEXIST) break;
  }
  if (bundle.empty()) {
    spdlog::warn("hang stacks: cannot create a bundle directory in {}: {}", attempt_dir, std::strerror(errno));
    return "";
  }
  for (const auto& [rank, text] : stacks)
    write_fresh(bundle + "/rank-" + std::to_string(rank) + ".txt", text.empty() ? "no stack could be taken\n" : text);
  // NCCL flight-recorder dumps written so far (torch names them
  // <prefix><rank>), beside the stacks.
  std::error_code ec;
  for (const auto& e : p.each) {
    const std::string dir = logs_.file(attempt, e.target.local_rank, "");
    for (const auto& f : std::filesystem::directory_iterator(dir, ec))
      if (f.is_regular_file(ec) && !f.is_symlink(ec) && f.path().filename().string().rfind(kNcclTracePrefix, 0) == 0)
        write_fresh(bundle + "/" + f.path().filename().string(), read_all(f.path().string()));
  }
  return bundle;
}

}  // namespace cxxrun::agent
