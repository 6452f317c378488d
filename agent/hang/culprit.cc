#include "agent/hang/culprit.h"

#include <algorithm>
#include <cstring>
#include <regex>
#include <sstream>

#include "agent/forensics/library_file.h"

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

// `eu-stack -m -s`: "PID 42 - process", "TID 42:", then one frame line
// each (eu_stack_frame) and, with debug info, "    w.c:4:44"; the thread
// whose TID is the PID is the main one.
std::vector<Frame> native_main_thread(const std::string& dump) {
  static const std::regex pid_line(R"re(^PID (\d+))re");
  static const std::regex tid_line(R"re(^TID (\d+):)re");
  static const std::regex source(R"re(^    (.+?):(\d+)(?::\d+)?\s*$)re");
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
    } else if (auto f = eu_stack_frame(line)) {
      main.push_back(*f);
    } else if (!main.empty() && std::regex_match(line, m, source)) {
      main.back().file = m[1];
      main.back().line = std::stoi(m[2]);
    }
  }
  return main;
}

// A function as a line shows it: a demangled C++ name without its
// parameters, qualifiers and clone suffixes ("gloo::...::waitRecv",
// "Waiter::operator()"); a frame without a symbol by its module.
std::string display_name(const Frame& f) {
  std::string name = f.function;
  for (bool cut = true; cut;) {
    cut = false;
    for (const char* suffix : {" const", " volatile", " &&", " &"})
      if (name.size() > strlen(suffix) && name.compare(name.size() - strlen(suffix), std::string::npos, suffix) == 0) {
        name.resize(name.size() - strlen(suffix));
        cut = true;
      }
    if (name.size() > 1 && name.back() == ']')
      if (const auto clone = name.rfind(" [clone "); clone != std::string::npos) {
        name.resize(clone);
        cut = true;
      }
  }
  if (!name.empty() && name.back() == ')') {
    int depth = 0;
    for (size_t i = name.size(); i-- > 0;) {
      depth += name[i] == ')' ? 1 : name[i] == '(' ? -1 : 0;
      if (depth == 0) {
        if (i > 0) name.resize(i);
        break;
      }
    }
  }
  return name.empty() ? basename_of(f.module) : name;
}

std::string where(const Frame& f) {
  if (f.line > 0) return basename_of(f.file) + ":" + std::to_string(f.line);
  if (!f.module.empty()) return basename_of(f.module);
  return f.file.empty() ? "" : basename_of(f.file);
}

}  // namespace

std::optional<Frame> eu_stack_frame(const std::string& line) {
  // "#<n> 0x<pc>", then -a's mark ("- 1" for a return address, four spaces
  // for the frame that was executing), " <symbol>" when one is known and
  // " - <module>" when the module is.
  static const std::regex head(R"re(^#\d+\s+0x[0-9a-fA-F]+)re");
  std::smatch m;
  if (!std::regex_search(line, m, head)) return std::nullopt;
  std::string rest = line.substr(m.length(0));
  if (rest.rfind(" - 1", 0) == 0 && (rest.size() == 4 || rest[4] == ' ')) rest.erase(0, 4);
  const auto first = rest.find_first_not_of(' ');
  rest = first == std::string::npos ? "" : rest.substr(first);
  while (!rest.empty() && (rest.back() == ' ' || rest.back() == '\r')) rest.pop_back();
  Frame f;
  if (rest.rfind("- ", 0) == 0) {
    f.module = rest.substr(2);  // no symbol
  } else if (const auto dash = rest.rfind(" - "); dash != std::string::npos) {
    f.function = rest.substr(0, dash);
    f.module = rest.substr(dash + 3);
  } else {
    f.function = rest;  // eu-stack without -m
  }
  // A symbol version: __pthread_mutex_lock@GLIBC_2.2.5, __libc_start_main@@GLIBC_2.34.
  static const std::regex version(R"re(@@?[A-Za-z_][A-Za-z0-9_.]*$)re");
  f.function = std::regex_replace(f.function, version, "");
  return f;
}

std::vector<Frame> main_thread_frames(const std::string& dump) {
  std::vector<Frame> frames = python_main_thread(dump);
  return frames.empty() ? native_main_thread(dump) : frames;
}

bool library_frame(const Frame& f) {
  if (f.module.empty()) return library_file(f.file);
  // The user's binary, but a system header's code inlined or instantiated
  // there (std::function, std::mutex): the library's.
  return library_file(f.module) || (!f.file.empty() && f.file.find("/usr/include/") != std::string::npos);
}

std::string where_it_waits(const std::vector<Frame>& frames) {
  if (frames.empty()) return "";
  size_t user = 0;
  while (user < frames.size() && library_frame(frames[user])) ++user;
  if (user == frames.size()) {
    // Nothing of the user's: the innermost frame says most.
    const std::string at = where(frames[0]);
    return display_name(frames[0]) + (at.empty() ? "" : " in " + at);
  }
  const Frame& called = user == 0 ? frames[0] : frames[user - 1];
  // Native code without debug info has no line: its function, in its
  // module, is where it is ("wedge in train").
  const Frame& mine = frames[user];
  const std::string at = mine.line > 0 || mine.function.empty() || mine.module.empty()
                             ? where(mine)
                             : display_name(mine) + " in " + basename_of(mine.module);
  return display_name(called) + (at.empty() ? "" : " at " + at);
}

HangPicture picture(const std::map<int, std::string>& dumps) {
  std::map<int, std::string> where;
  for (const auto& [rank, dump] : dumps) where[rank] = where_it_waits(main_thread_frames(dump));
  return stacks::group_by_place(where);
}

Blame blame(const HangPicture& p, const std::vector<Accused>& named, const std::vector<StoppedRank>& stopped,
            const std::vector<int>& running) {
  Blame b;
  if (!stopped.empty()) {
    const StoppedRank& s = stopped.front();
    b.rank = s.rank;
    b.reason = "rank " + std::to_string(s.rank) + " was stopped by a signal at " + s.since +
               " and never continued: the other ranks wait for it";
    if (stopped.size() > 1) {
      std::vector<int> others;
      for (size_t i = 1; i < stopped.size(); ++i) others.push_back(stopped[i].rank);
      b.reason += " (stopped too: " + std::string(others.size() == 1 ? "rank " : "ranks ") + rank_list(others) + ")";
    }
    return b;
  }
  if (p.apart) {
    b.rank = *p.apart;
    b.reason = "rank " + std::to_string(*p.apart) + " stands apart";
    return b;
  }
  if (!named.empty()) {
    // The first past its limit: the most overdue, the lowest rank among equals.
    const Accused* first = &named.front();
    std::vector<int> ranks;
    for (const Accused& a : named) {
      ranks.push_back(a.rank);
      if (a.overdue > first->overdue || (a.overdue == first->overdue && a.rank < first->rank)) first = &a;
    }
    b.rank = first->rank;
    if (running.size() <= 1) return b;  // no peer to stand apart from: nothing to add
    // One named rank is the cause only when no other rank waits where it
    // waits: in a 2-2 split, or with every rank alike, the others went
    // silent with it, and it was named first by a few milliseconds.
    const bool shares_its_place = std::any_of(p.groups.begin(), p.groups.end(), [&](const HangPicture::Group& g) {
      return g.ranks.size() > 1 && std::find(g.ranks.begin(), g.ranks.end(), b.rank) != g.ranks.end();
    });
    b.cause = named.size() == 1 && !shares_its_place;
    b.reason = named.size() == 1
                   ? "no rank stands apart; rank " + std::to_string(b.rank) + " is killed for its own verdict" +
                         (b.cause ? "" : ", not as the cause")
                   : "no rank stands apart; rank " + std::to_string(b.rank) + " is killed as the first of ranks " +
                         rank_list(ranks) + " past its limit, not as the cause";
    return b;
  }
  if (!running.empty()) {
    b.rank = running.front();
    if (running.size() == 1) return b;
    b.cause = false;
    b.reason = "no rank stands apart; rank " + std::to_string(b.rank) +
               " was killed only to stop the job, not as its cause";
  }
  return b;
}

}  // namespace cxxrun::agent
