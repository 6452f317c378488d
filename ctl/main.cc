// cxxrunctl: attaches to a running cxxrun job through its rendezvous store
// and shows or stops it (docs/cxxrunctl.md). It reads the job board the
// agents keep (rendezvous/job_board.h), asks the agents for their ranks'
// logs and stacks (rendezvous/ctl_requests.h) and writes the job's stop
// request there; the store's token guards all of it.
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "ctl/board_view.h"
#include "ctl/log_view.h"
#include "ctl/options.h"
#include "ctl/stack_view.h"
#include "rendezvous/attach.h"
#include "rendezvous/ctl_requests.h"
#include "rendezvous/job_board.h"

namespace {

using namespace cxxrun;
using std::chrono::milliseconds;

// cxxrunctl's exit codes (docs/cxxrunctl.md).
namespace code {
constexpr int ok = 0, usage = 2, unreachable = 3, refused = 4, no_job = 5, not_answered = 6, not_stopped = 6;
}

volatile std::sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

long long now_ms() {
  return std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// One line, the code its cause has.
struct Failed {
  int code;
  std::string line;
};

std::unique_ptr<store::StoreClient> attach(const ctl::Options& o) {
  try {
    return rendezvous::attach(o.rdzv, o.timeout);
  } catch (const rendezvous::AttachRefused& e) {
    throw Failed{code::refused, e.what()};
  } catch (const rendezvous::RendezvousError& e) {
    throw Failed{code::unreachable, e.what()};
  }
}

std::vector<ctl::NodeRow> read_board(store::StoreClient& client, const ctl::Options& o) {
  std::vector<std::pair<std::string, std::string>> records;
  try {
    records = rendezvous::board::read(client, o.rdzv.settings.run_id);
  } catch (const store::StoreRefused& e) {
    throw Failed{code::refused, "the rendezvous store of job=" + o.rdzv.settings.run_id + " refused this client: " +
                                    e.what()};
  } catch (const store::StoreError& e) {
    throw Failed{code::unreachable, "cannot read the job board of job=" + o.rdzv.settings.run_id + " at " +
                                        o.rdzv.settings.endpoint + ": " + e.what()};
  }
  if (records.empty())
    throw Failed{code::no_job, "no agent of job=" + o.rdzv.settings.run_id + " is on the board at " +
                                   o.rdzv.settings.endpoint + " (is the job running, with that --rdzv-id?)"};
  return ctl::rows_of(records);
}

int status(const ctl::Options& o) {
  auto client = attach(o);
  const auto rows = read_board(*client, o);
  std::cout << (o.json ? ctl::status_json(o.rdzv.settings.run_id, rows, now_ms())
                       : ctl::status_text(o.rdzv.settings.run_id, rows, now_ms()))
            << std::flush;
  return code::ok;
}

// The terminal in non-canonical mode while top runs, so q needs no Enter;
// restored on every way out.
class RawInput {
 public:
  RawInput() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    raw.c_lflag &= ~(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawInput() {
    if (active_) tcsetattr(STDIN_FILENO, TCSANOW, &saved_);
  }
  // Waits up to `limit` for a key; whether it was q.
  bool quit_within(milliseconds limit) const {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (!active_) {
      std::this_thread::sleep_for(limit);
      return false;
    }
    if (::poll(&p, 1, static_cast<int>(limit.count())) <= 0) return false;
    char c = 0;
    return ::read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q');
  }

 private:
  termios saved_{};
  bool active_ = false;
};

int top(const ctl::Options& o) {
  auto client = attach(o);
  const bool tty = isatty(STDOUT_FILENO);
  RawInput input;
  for (int frame = 0; !g_interrupted && (!o.iterations || frame < *o.iterations); ++frame) {
    if (frame > 0 && input.quit_within(o.interval)) break;
    if (g_interrupted) break;
    const auto rows = read_board(*client, o);
    size_t lines = 1000000;
    winsize ws{};
    if (tty && ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 4) lines = ws.ws_row - 3;
    const std::string text = ctl::top_frame(o.rdzv.settings.run_id, rows, now_ms(), lines);
    // In place on a terminal: home, the frame, clear what the last one left below.
    std::cout << (tty ? "\x1b[H" + text + "\x1b[J" : text + "\n") << std::flush;
  }
  return code::ok;
}

// The nodes a request goes to: those whose record is fresh (an agent that
// stopped publishing would only make the caller wait out its deadline).
std::vector<std::string> live_nodes(const std::vector<ctl::NodeRow>& rows) {
  std::vector<std::string> nodes;
  const long long now = now_ms();
  for (const auto& n : rows)
    if (n.readable && now - n.updated_ms <= static_cast<long long>(ctl::kStaleSeconds * 1000)) nodes.push_back(n.node);
  return nodes;
}

// One round of `logs`: asks every live node, prints what came, names those
// that did not answer. Returns whether every node answered.
bool logs_round(store::StoreClient& client, const ctl::Options& o, std::map<int, long long>& from) {
  const auto rows = read_board(client, o);
  const std::vector<std::string> nodes = live_nodes(rows);
  nlohmann::json request = {{"op", "logs"}, {"rank", o.rank.value_or(-1)}};
  nlohmann::json offsets = nlohmann::json::object();
  for (const auto& [rank, offset] : from) offsets[std::to_string(rank)] = offset;
  request["from"] = offsets;
  const std::string& run_id = o.rdzv.settings.run_id;
  const long long n = rendezvous::requests::post(client, run_id, request.dump());
  const auto answers =
      rendezvous::requests::gather(client, run_id, n, nodes, std::chrono::steady_clock::now() + o.timeout);
  const ctl::LogBatch batch = ctl::merge_logs(answers, o.rank.value_or(-1));
  std::cout << batch.lines << std::flush;
  for (const auto& [rank, next] : batch.next) from[rank] = next;
  for (const auto& note : batch.notes) std::cerr << "cxxrunctl: " << note << std::endl;
  std::string silent;
  for (const auto& node : nodes)
    if (!answers.count(node)) silent += (silent.empty() ? "" : ", ") + node;
  if (!silent.empty())
    std::cerr << "cxxrunctl: no answer within " << o.timeout.count() / 1000.0 << " s from: " << silent << std::endl;
  return silent.empty();
}

int logs(const ctl::Options& o) {
  auto client = attach(o);
  std::map<int, long long> from;
  bool all = false;
  try {
    all = logs_round(*client, o, from);
    while (o.follow && !g_interrupted) {
      // About a second between rounds, cut short by Ctrl-C.
      for (int i = 0; i < 10 && !g_interrupted; ++i) std::this_thread::sleep_for(milliseconds(100));
      if (g_interrupted) break;
      all = logs_round(*client, o, from);
    }
  } catch (const store::StoreRefused& e) {
    throw Failed{code::refused, std::string("the job's store refused this client: ") + e.what()};
  } catch (const store::StoreError& e) {
    if (!o.follow) throw Failed{code::unreachable, std::string("cannot ask the job's agents: ") + e.what()};
    std::cerr << "cxxrunctl: the job's store is gone (" << e.what() << "): the job ended" << std::endl;
    return code::ok;
  } catch (const Failed& f) {
    // Following a job whose agents all left the board: it ended.
    if (!o.follow || f.code == code::refused) throw;
    std::cerr << "cxxrunctl: " << f.line << std::endl;
    return code::ok;
  }
  return all ? code::ok : code::not_answered;
}

// Every rank's stack now (or --rank's), from every live node, then where
// they wait, grouped as a hang verdict groups them.
int stacks(const ctl::Options& o) {
  auto client = attach(o);
  const std::string& run_id = o.rdzv.settings.run_id;
  try {
    const auto rows = read_board(*client, o);
    if (o.rank) {
      std::vector<int> known;
      bool partial = false;
      for (const auto& n : rows) {
        partial = partial || !n.readable || n.ranks_left_out > 0;
        for (const auto& r : n.ranks) known.push_back(r.rank);
      }
      if (!partial && std::find(known.begin(), known.end(), *o.rank) == known.end())
        throw Failed{code::usage, "--rank=" + std::to_string(*o.rank) + ": job " + run_id + " has no such rank (" +
                                      std::to_string(known.size()) + " ranks on the board)"};
    }
    const std::vector<std::string> nodes = live_nodes(rows);
    const nlohmann::json request = {{"op", "stacks"}, {"rank", o.rank.value_or(-1)}};
    const long long n = rendezvous::requests::post(*client, run_id, request.dump());
    const auto answers =
        rendezvous::requests::gather(*client, run_id, n, nodes, std::chrono::steady_clock::now() + o.timeout);
    const ctl::StackReport report = ctl::render_stacks(answers, o.rank.value_or(-1));
    std::cout << report.text << std::flush;
    for (const auto& note : report.notes) std::cerr << "cxxrunctl: " << note << std::endl;
    if (report.ranks.empty())
      std::cerr << "cxxrunctl: no running rank" << (o.rank ? " " + std::to_string(*o.rank) : std::string())
                << " had a stack to show" << std::endl;
    std::string silent;
    for (const auto& node : nodes)
      if (!answers.count(node)) silent += (silent.empty() ? "" : ", ") + node;
    if (silent.empty()) return code::ok;
    std::cerr << "cxxrunctl: no answer within " << o.timeout.count() / 1000.0 << " s from: " << silent << std::endl;
    return code::not_answered;
  } catch (const store::StoreRefused& e) {
    throw Failed{code::refused, std::string("the job's store refused this client: ") + e.what()};
  } catch (const store::StoreError& e) {
    throw Failed{code::unreachable, std::string("cannot ask the job's agents: ") + e.what()};
  }
}

int stop(const ctl::Options& o) {
  auto client = attach(o);
  const auto before = read_board(*client, o);
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  const long long at = now_ms();
  try {
    rendezvous::board::request_stop(*client, o.rdzv.settings.run_id,
                                    {at, std::string("cxxrunctl on ") + host + ", pid " + std::to_string(getpid())});
  } catch (const store::StoreError& e) {
    throw Failed{code::unreachable, std::string("cannot write the stop request: ") + e.what()};
  }
  std::cout << "asked the " << before.size() << " nodes of job " << o.rdzv.settings.run_id
            << " to stop; waiting up to " << o.timeout.count() / 1000.0 << " s for each to begin" << std::endl;
  // Each agent reads the request at its next board publish (~2 s) and shows
  // a phase other than running in the record after it.
  const auto deadline = std::chrono::steady_clock::now() + std::max(o.timeout, milliseconds(5000));
  std::set<std::string> waiting;
  for (const auto& n : before) waiting.insert(n.node);
  while (!waiting.empty() && std::chrono::steady_clock::now() < deadline && !g_interrupted) {
    std::this_thread::sleep_for(milliseconds(250));
    std::vector<std::pair<std::string, std::string>> records;
    try {
      records = rendezvous::board::read(*client, o.rdzv.settings.run_id);
    } catch (const store::StoreError&) {
      waiting.clear();  // the store went away with the job: every agent left
      break;
    }
    // The board is gone: the job's last agent removed its keys as it left
    // (a store that outlives the job, etcd or cxxrun-rdzv), so every agent
    // had stopped.
    if (records.empty()) {
      waiting.clear();
      break;
    }
    for (const auto& n : ctl::rows_of(records))
      if (n.updated_ms >= at && n.phase != "running") waiting.erase(n.node);
  }
  if (!waiting.empty()) {
    std::string names;
    for (const auto& n : waiting) names += (names.empty() ? "" : ", ") + n;
    throw Failed{code::not_stopped, "these nodes did not show a stop in time: " + names +
                                        " (the request stands; they act on it when they next reach the store)"};
  }
  std::cout << "every node is stopping" << std::endl;
  return code::ok;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  ctl::Options o;
  try {
    o = ctl::parse(args);
  } catch (const ctl::UsageError& e) {
    std::cerr << "cxxrunctl: " << e.what() << std::endl;
    return code::usage;
  }
  if (o.command == ctl::Command::help) {
    std::cout << ctl::usage();
    return code::ok;
  }
  struct sigaction sa {};
  sa.sa_handler = on_interrupt;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
  try {
    switch (o.command) {
      case ctl::Command::status: return status(o);
      case ctl::Command::top: return top(o);
      case ctl::Command::logs: return logs(o);
      case ctl::Command::stacks: return stacks(o);
      case ctl::Command::stop: return stop(o);
      case ctl::Command::help: break;
    }
  } catch (const Failed& f) {
    std::cerr << "cxxrunctl: " << f.line << std::endl;
    return f.code;
  } catch (const std::exception& e) {
    std::cerr << "cxxrunctl: " << e.what() << std::endl;
    return code::unreachable;
  }
  return code::ok;
}
