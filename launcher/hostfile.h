// The hosts of a one-command job (cxxrun --hostfile / --hosts,
// docs/multi-host.md): DeepSpeed's "host slots=N" lines and MPI's "host:N",
// '#' comments and blank lines, or a comma-separated list. Every host is
// checked before anything starts: one line naming the value and the rule
// (UsageError, exit 2) for an empty list, a host named twice, slots that are
// not a positive number, or a name a shell or ssh would read as something
// else (a leading '-' is an ssh option; blanks and quotes split it).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::launcher {

struct Host {
  // As written, "node1" or "alice@node1": what --rsh is given.
  std::string login;
  // The machine alone ("node1"): what the other hosts reach it by.
  std::string name;
  // Its workers (--nproc-per-node), when the file says; none: the default.
  std::optional<int> slots;
};

// The most slots a host may have: a typo guard (a node has no more CPUs).
inline constexpr int kMaxSlots = 4096;

// `origin` names the source in errors: "--hostfile=hosts.txt" or
// "PET_HOSTFILE=hosts.txt"; each error also names the line.
std::vector<Host> parse_hostfile(std::string_view text, const std::string& origin);
// "h1,h2:4,alice@h3".
std::vector<Host> parse_hosts_list(std::string_view text, const std::string& origin);
// Reads `path` (UsageError when it cannot) and parses it.
std::vector<Host> read_hostfile(const std::string& path, const std::string& origin);

}  // namespace cxxrun::launcher
