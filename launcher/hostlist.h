// Slurm's compressed host lists, as in SLURM_JOB_NODELIST:
// "gpu[001-004,010],cpu-a[1-2]" is gpu001..gpu004, gpu010, cpu-a1, cpu-a2.
// Our own parser rather than `scontrol show hostnames`: it needs no Slurm
// client on the node and no subprocess, it works the same in unit tests,
// and the format is small (Slurm's hostlist.c): comma-separated entries,
// each a prefix with bracketed ranges that keep their zero padding; several
// bracket groups in one entry multiply out, in order.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::launcher {

// The hosts in order. Throws std::invalid_argument naming what is wrong (an
// unclosed bracket, a range that runs backwards, more than `limit` hosts).
std::vector<std::string> expand_hostlist(std::string_view list, size_t limit = 100000);

}  // namespace cxxrun::launcher
