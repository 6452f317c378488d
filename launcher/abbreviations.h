// torchrun's parser is argparse with allow_abbrev: a long option may be cut
// to any prefix that names one option ("--nproc=2", "--redirect=3" in
// PyTorch's own launcher test). CLI11 knows only whole names, so the launcher
// spells such prefixes out before CLI11 sees the command line.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "launcher/option_table.h"

namespace cxxrun::launcher {

// `args` (argv without argv[0]) with every abbreviated launcher option before
// the program replaced by the spelling it abbreviates ("--nproc_per=2" ->
// "--nproc_per_node=2", "--stand" -> "--standalone"); the value, after '=' or
// in the next word, is kept as it is. A whole name always wins over a prefix
// ("--role" stays itself). A prefix counts once per option, whichever of its
// spellings it matches, so "--nproc" is "--nproc-per-node" and not ambiguous
// between --nproc-per-node and --nproc_per_node. Stops at "--" and at the
// program: its words are never touched. Words that abbreviate nothing are
// left for the parser to refuse. Throws UsageError for a prefix of several
// options, naming the prefix and every option it could be.
std::vector<std::string> expand_abbreviations(const std::vector<std::string>& args,
                                              std::span<const OptionSpec> table);

}  // namespace cxxrun::launcher
