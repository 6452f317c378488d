// Reading the kernel's small text files (/proc/<pid>/stat, a cgroup's
// cpu.stat, a PSI file) the cheap way: one open, one or two reads, one
// close, no stream. The sampler reads several for every rank ten times a
// second, so this is most of its cost.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace cxxrun::agent {

// The first `limit` bytes of `path`; nullopt when it is absent or cannot be
// read (a process that has exited, a controller that is not there): the
// callers treat that as "not known", never as an error.
std::optional<std::string> read_small_file(const std::string& path, std::size_t limit = 4096);

}  // namespace cxxrun::agent
