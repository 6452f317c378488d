#include "agent/culprit.h"

#include <algorithm>
#include <regex>
#include <sstream>

namespace cxxrun::agent {
namespace {

std::string basename_of(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Python's faulthandler: "Thread 0x... (most recent call first):" or
// "Current thread 0x... (most recent call first):", then one
// `  File "w.py", line 78 in wedge` per frame.
std::vector<Frame> python_main_thread(const std::string& dump) {
  static const std::regex header(R"re(^(Current thread|Thread) 0x[0-9a-fA-F]+ \(most recent call first\):)re");
  static const std::regex frame(R"re(^\s+File "(.*)", line (\d+) in (.*)$)re");
  std::vector<std::vector<Frame>> threads;
  std::istringstream in(dump);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, header)) {
      threads.emplace_back();
    } else if (!threads.empty() && std::regex_match(line, m, frame)) {
      threads.back().push_back(Frame{m[1], std::stoi(m[2]), m[3], ""});
    }
  }
  // The interpreter lists its threads newest first: the main thread last.
  while (!threads.empty() && threads.back().empty()) threads.pop_back();
  return threads.empty() ? std::vector<Frame>{} : threads.back();
}

// `eu-stack -m -s`: "PID 42 - process", "TID 42:", then per frame
// "#0  0x00007f... func - /lib/x.so" and, with debug info, "    w.c:4:44";
// the thread whose TID is the PID is the main one.
std::vector<Frame> native_main_thread(const std::string& dump) {
  static const std::regex pid_line(R"re(^PID (\d+))re");
  static const std::regex tid_line(R"re(^TID (\d+):)re");
  static const std::regex frame(R"re(^#\d+\s+0x[0-9a-fA-F]+\s+(\S+)(?:\s+-\s+(\S+))?)re");
  static const std::regex source(R"re(^\s+(\S+?):(\d+)(?::\d+)?\s*$)re");
  std::string pid, tid;
  std::vector<Frame> main;
  std::istringstream in(dump);
  for (std::string line; std::getline(in, line);) {
    std::smatch m;
    if (std::regex_search(line, m, pid_line)) {
      pid = m[1];
    } else if (std::regex_search(line, m, tid_line)) {
      tid = m[1];
    } else if (tid != pid || pid.empty()) {
      continue;
    } else if (std::regex_search(line, m, frame)) {
      std::string function = m[1];
      function = function.substr(0, function.find('@'));  // symbol versions: __pthread_mutex_lock@GLIBC_2.2.5
      main.push_back(Frame{"", 0, function, m[2].matched ? m[2].str() : ""});
    } else if (!main.empty() && std::regex_match(line, m, source)) {
      main.back().file = m[1];
      main.back().line = std::stoi(m[2]);
    }
  }
  return main;
}

std::string where(const Frame& f) {
  if (f.line > 0) return basename_of(f.file) + ":" + std::to_string(f.line);
  if (!f.module.empty()) return basename_of(f.module);
  return f.file.empty() ? "" : basename_of(f.file);
}

}  // namespace

std::vector<Frame> main_thread_frames(const std::string& dump) {
  std::vector<Frame> frames = python_main_thread(dump);
  return frames.empty() ? native_main_thread(dump) : frames;
}

bool library_file(const std::string& file) {
  if (file.empty() || file.rfind("<frozen ", 0) == 0) return true;
  for (const char* part : {"/site-packages/", "/dist-packages/", "/lib/python3", "/usr/lib/", "/lib/x86_64-linux-gnu/",
                           "/lib/aarch64-linux-gnu/", "/lib64/"})
    if (file.find(part) != std::string::npos) return true;
  return false;
}

bool library_frame(const Frame& f) { return f.module.empty() ? library_file(f.file) : library_file(f.module); }

std::string where_it_waits(const std::vector<Frame>& frames) {
  if (frames.empty()) return "";
  size_t user = 0;
  while (user < frames.size() && library_frame(frames[user])) ++user;
  if (user == frames.size()) {
    // Nothing of the user's: the innermost frame says most.
    const std::string at = where(frames[0]);
    return frames[0].function + (at.empty() ? "" : " in " + at);
  }
  const Frame& called = user == 0 ? frames[0] : frames[user - 1];
  const std::string at = where(frames[user]);
  return called.function + (at.empty() ? "" : " at " + at);
}

std::string rank_list(const std::vector<int>& ranks) {
  std::vector<int> r = ranks;
  std::sort(r.begin(), r.end());
  if (r.empty()) return "";
  bool consecutive = true;
  for (size_t i = 1; i < r.size(); ++i) consecutive = consecutive && r[i] == r[i - 1] + 1;
  if (consecutive && r.size() > 2) return std::to_string(r.front()) + "\u2013" + std::to_string(r.back());
  std::string out;
  for (int x : r) out += (out.empty() ? "" : ", ") + std::to_string(x);
  return out;
}

HangPicture picture(const std::map<int, std::string>& dumps) {
  std::map<std::string, std::vector<int>> groups;  // where -> ranks
  std::vector<int> without;
  for (const auto& [rank, dump] : dumps) {
    const std::string at = where_it_waits(main_thread_frames(dump));
    (at.empty() ? without : groups[at]).push_back(rank);
  }
  std::vector<std::pair<std::string, std::vector<int>>> ordered(groups.begin(), groups.end());
  std::sort(ordered.begin(), ordered.end(), [](const auto& a, const auto& b) { return a.second[0] < b.second[0]; });

  HangPicture p;
  size_t smallest = dumps.size() + 1;
  for (const auto& [at, ranks] : ordered) {
    p.line += (p.line.empty() ? "" : "; ") + std::string(ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks) +
              (ranks.size() == 1 ? " waits in " : " wait in ") + at;
    // The smallest group stands apart; the lowest rank among equals.
    if (ranks.size() < smallest) {
      smallest = ranks.size();
      p.culprit = ranks[0];
    }
  }
  if (!without.empty())
    p.line += (p.line.empty() ? "" : "; ") + std::string(without.size() == 1 ? "rank " : "ranks ") +
              rank_list(without) + ": no stack";
  return p;
}

}  // namespace cxxrun::agent
