// Interpreters for single option values. Each throws UsageError whose message
// starts with value.shown() ("--nnodes=2:1" or "PET_NNODES=2:1") and states
// the rule that was broken.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "agent/config.h"
#include "launcher/errors.h"
#include "launcher/raw_options.h"
#include "launcher/text.h"  // trim, split: every includer parses with them

namespace cxxrun::launcher {

// Python int(): optional sign, digits, surrounding blanks.
int parse_int(const RawValue& value);
// Python float(), but finite only.
double parse_float(const RawValue& value);

// The same, as helpers that report failure instead of throwing.
std::optional<long long> integer_of(std::string_view text);
std::optional<double> number_of(std::string_view text);  // finite only
// "SIGTERM", "TERM", "term" or "15" -> 15; 0 when it is none of these.
int signal_of(std::string_view text);

// "N" or "MIN:MAX" with 0 < MIN <= MAX.
std::pair<int, int> parse_nnodes(const RawValue& value);
int parse_max_restarts(const RawValue& value);  // >= 0
int parse_port(const RawValue& value);          // 1..65535
double parse_positive_seconds(const RawValue& value);

// torchrun's Std syntax: ^[0123]$ or ^(\d:[0123],)*(\d:[0123])$.
agent::StdSpec parse_std_spec(const RawValue& value);
// "0,1,2"; empty text means every rank (an empty set).
std::set<int> parse_local_ranks_filter(const RawValue& value);
// "k1=v1,k2=v2": split on ',' then on the first '='; blanks stripped.
std::map<std::string, std::string> parse_rdzv_conf(const RawValue& value);
// "SIGTERM,INT,..." -> signal numbers, in order, without duplicates.
std::vector<int> parse_signals(const RawValue& value);

// LOGLEVEL as torch hands it to Python's logging.Logger.setLevel(): one of
// Python's level names, upper case only (setLevel("debug") raises there too).
// Returns the level cxxrun logs at: DEBUG, INFO, WARNING, ERROR or CRITICAL.
std::string parse_log_level(const RawValue& value);

// Throws unless value.text is one of `choices`.
void check_choice(const RawValue& value, const std::vector<std::string>& choices);

}  // namespace cxxrun::launcher
