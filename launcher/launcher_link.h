// The remote agent's end of a one-command job (cxxrun --from-launcher, which
// cxxrun --hostfile puts on every host's command line; docs/multi-host.md):
// its standard input is the launcher's pipe, through --rsh.
//
//   - The first line is the rendezvous store's token (empty: none). It comes
//     this way, never in argv or the environment, which other users of the
//     host can read (/proc/PID/cmdline, ps e).
//   - Then one line per signal the launcher got ("SIGINT", "SIGTERM", ...):
//     this agent raises it on itself and stops as if it had got it.
//   - EOF means the launcher or its connection is gone: this agent raises
//     SIGTERM on itself, so it stops its workers and exits; nothing is left
//     running on the host.
//
// The pipe is moved off descriptor 0 (close-on-exec) and 0 becomes
// /dev/null: workers never read the launcher's pipe, nor hold it open.
//
// On stdout, two lines for the launcher alone (it shows neither): kReady
// once the token is read, and kExited with the agent's exit code as its last
// line, so the code is known whatever the --rsh program does with it (ssh
// says 255 for its own failures and for a command a signal ended).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace cxxrun::launcher {

inline constexpr std::string_view kReady = "cxxrun-agent: ready pid=";
inline constexpr std::string_view kExited = "cxxrun-agent: exit=";
inline constexpr std::chrono::seconds kTokenDeadline{60};

struct LauncherLink {
  std::string token;
  int fd = -1;        // the launcher's pipe, now off descriptor 0
  std::string after;  // bytes read past the token's line
};

// Reads the token's line from descriptor 0 within `deadline`, moves the pipe
// off 0 and says kReady. Throws UsageError when no line comes in time or
// stdin ends first (this flag is for agents a launcher starts).
LauncherLink take_launcher_stdin(std::chrono::milliseconds deadline = kTokenDeadline);

// Starts a thread (every signal blocked in it) that turns each later line
// into that signal raised on this process, and EOF into SIGTERM.
void watch_launcher(LauncherLink link);

// The last line on stdout: kExited and `code`.
void say_exited(int code);

// The signal a control line names ("SIGINT"), or 0.
int control_signal(std::string_view line);
// The line that carries `sig`: "SIGINT".
std::string control_line(int sig);

}  // namespace cxxrun::launcher
