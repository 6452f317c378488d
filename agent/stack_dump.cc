#include "agent/stack_dump.h"

#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <boost/asio/post.hpp>

#include "agent/log_dir.h"
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

// The pids the hook registered in `path`, first first ("cxxrun: stack dump
// on signal 37 for pid 42").
std::vector<pid_t> registered(const std::string& path) {
  static const std::regex line(R"re(^cxxrun: stack dump on signal \d+ for pid (\d+)$)re");
  std::vector<pid_t> pids;
  std::ifstream in(path);
  for (std::string text; std::getline(in, text);) {
    std::smatch m;
    if (std::regex_match(text, m, line)) pids.push_back(std::stoi(m[1]));
  }
  return pids;
}

// eu-stack's view of `pid`, bounded: it runs on a thread of its own.
std::string native_stack(pid_t pid) {
  const std::string command = "timeout -s KILL 2 eu-stack -m -s -p " + std::to_string(pid) + " 2>&1";
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

}  // namespace

int stack_signal() { return SIGRTMIN + 3; }

struct StackDump::Pending {
  struct Each {
    Target target;
    std::string file;  // the hook's stacks.txt; "" for a native worker
    off_t start = 0;
    off_t last = 0;
    int stable = 0;
    bool done = false;
    std::string text;
  };
  int attempt = 0;
  std::vector<Each> each;
  std::vector<Done> waiters;
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

void StackDump::collect(int attempt, const std::vector<Target>& targets, Done done) {
  if (pending_ && !pending_->waiters.empty()) {
    pending_->waiters.push_back(std::move(done));
    return;
  }
  if (pending_)
    for (auto& t : pending_->readers) t.join();
  pending_ = std::make_shared<Pending>();
  Pending& p = *pending_;
  p.attempt = attempt;
  p.waiters.push_back(std::move(done));
  p.deadline = std::chrono::steady_clock::now() + kStackDeadline;
  for (const Target& t : targets) {
    Pending::Each e;
    e.target = t;
    const std::string file = logs_.file(attempt, t.local_rank, "stacks.txt");
    std::vector<pid_t> pids = file.empty() ? std::vector<pid_t>{} : registered(file);
    pid_t python = 0;
    for (pid_t pid : pids)
      if (kill(pid, 0) == 0) {
        python = pid;
        break;
      }
    if (python > 0) {
      e.file = file;
      e.start = e.last = size_of(file);
      kill(python, stack_signal());
    } else {
      // Read from outside, on a thread: eu-stack stops the process a moment.
      const size_t index = p.each.size();
      std::weak_ptr<Pending> weak = pending_;
      p.readers.emplace_back([this, weak, index, pid = t.pid] {
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
    p.each.push_back(std::move(e));
  }
  timer_.expires_after(kPoll);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (!ec) poll();
  });
}

void StackDump::poll() {
  if (!pending_ || pending_->waiters.empty()) return;
  Pending& p = *pending_;
  bool all = true;
  for (auto& e : p.each) {
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
    }
    all = false;
  }
  if (all || std::chrono::steady_clock::now() >= p.deadline) return finish();
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
  std::string bundle;
  if (logs_.enabled()) {
    bundle = logs_.run_dir() + "/attempt_" + std::to_string(p.attempt) + "/hang-" + std::to_string(hangs_++);
    std::error_code ec;
    std::filesystem::create_directories(bundle, ec);
    for (const auto& [rank, text] : stacks) {
      std::ofstream out(bundle + "/rank-" + std::to_string(rank) + ".txt");
      out << (text.empty() ? "no stack could be taken\n" : text);
    }
    // NCCL flight-recorder dumps written so far (torch names them
    // <prefix><rank>), beside the stacks.
    for (const auto& e : p.each) {
      const std::string dir = logs_.file(p.attempt, e.target.local_rank, "");
      for (const auto& f : std::filesystem::directory_iterator(dir, ec))
        if (f.path().filename().string().rfind(kNcclTracePrefix, 0) == 0)
          std::filesystem::copy_file(f.path(), bundle + "/" + f.path().filename().string(),
                                     std::filesystem::copy_options::overwrite_existing, ec);
    }
  }
  std::vector<Done> waiters = std::move(p.waiters);
  p.waiters.clear();
  for (auto& done : waiters) done(stacks, bundle);
}

}  // namespace cxxrun::agent
