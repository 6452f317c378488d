// --help in argparse's layout, generated from the option table.
#include <sstream>

#include "launcher/option_table.h"
#include "launcher/options.h"

namespace cxxrun::launcher {
namespace {

constexpr size_t kWidth = 100;      // usage lines wrap here
constexpr size_t kHelpColumn = 24;  // argparse's default help position

std::string with_metavar(std::string_view name, const OptionSpec& spec) {
  std::string s(name);
  if (spec.bare_value != nullptr)
    s.append("[=").append(spec.metavar).append("]");  // its value never comes in the next word
  else if (!spec.is_flag())
    s.append(" ").append(spec.metavar);
  return s;
}

std::string usage() {
  const std::string lead = "usage: cxxrun ";
  std::vector<std::string> items;
  for (const OptionSpec& spec : option_table())
    items.push_back("[" + with_metavar(spellings_of(spec).front(), spec) + "]");
  items.push_back("training_script ...");

  std::string out = lead, line;
  for (const std::string& item : items) {
    if (!line.empty() && lead.size() + line.size() + 1 + item.size() > kWidth) {
      out += line + "\n" + std::string(lead.size(), ' ');
      line.clear();
    }
    line += (line.empty() ? "" : " ") + item;
  }
  return out + line + "\n";
}

void entry(std::ostringstream& out, const std::string& left, std::string_view help) {
  std::string head = "  " + left;
  if (head.size() + 2 <= kHelpColumn)
    out << head << std::string(kHelpColumn - head.size(), ' ') << help << "\n";
  else
    out << head << "\n" << std::string(kHelpColumn, ' ') << help << "\n";
}

}  // namespace

std::string help_text() {
  std::ostringstream out;
  out << usage() << "\n"
      << "Torch Distributed Elastic Training Launcher, in native C++: a drop-in for torchrun.\n\n"
      << "positional arguments:\n";
  entry(out, "training_script",
        "Full path to the (single GPU) training program/script to be launched in parallel, "
        "followed by all the arguments for the training script.");
  entry(out, "training_script_args", "Passed to the training program untouched.");

  for (Group group : {Group::general, Group::workers, Group::rendezvous, Group::launch,
                      Group::logging, Group::static_rdzv, Group::extensions, Group::hosts}) {
    out << "\n" << group_title(group) << ":\n";
    for (const OptionSpec& spec : option_table()) {
      if (spec.group != group) continue;
      std::string left;
      for (std::string_view name : spellings_of(spec))
        left += (left.empty() ? "" : ", ") + with_metavar(name, spec);
      entry(out, left, spec.help);
    }
  }

  out << "\n"
         "Options with a value also read PET_<NAME> (e.g. PET_NPROC_PER_NODE=4), as torchrun's\n"
         "do; --logs-specs and --numa-binding read none, and --shutdown-timeout then reads\n"
         "TORCH_ELASTIC_SHUTDOWN_TIMEOUT. The flags --standalone, -m, --no-python,\n"
         "--run-path and --virtual-local-rank read PET_<NAME>=0|1. The command line wins.\n"
         "--inject-fault reads CXXRUN_INJECT_FAULTS instead;\n"
         "the faults from both are injected. --tty reads CXXRUN_TTY instead.\n"
         "A long option may be shortened to any prefix that names one option (--nproc=2),\n"
         "as torchrun's argparse allows; a prefix of several options is refused.\n"
         "TORCHELASTIC_ENABLE_FILE_TIMER=1 starts torchrun's file-timer watchdog (FIFO at\n"
         "$TORCHELASTIC_TIMER_FILE, or a fresh path).\n"
         "ELF binaries and scripts whose #! line is not python run directly; other\n"
         "scripts run as $PYTHON_EXEC -u SCRIPT (default python3).\n";
  return out.str();
}

}  // namespace cxxrun::launcher
