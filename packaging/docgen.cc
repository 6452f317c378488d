// docgen: writes the man pages and the bash and zsh completions of cxxrun,
// cxxrun-rdzv and cxxrunctl from the very tables their --help comes from
// (cxxrun's option table, cxxrun-rdzv's CLI11 app, cxxrunctl's option and
// command tables), so a flag cannot be in one and missing from another. Run
// by the build (packaging/CMakeLists.txt):
//   docgen OUTDIR VERSION
// writes OUTDIR/man/man1/{cxxrun,cxxrun-rdzv,cxxrunctl}.1,
// OUTDIR/bash-completion/completions/{cxxrun,cxxrun-rdzv,cxxrunctl} and
// OUTDIR/zsh/vendor-completions/{_cxxrun,_cxxrun-rdzv,_cxxrunctl}.
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ctl/options.h"
#include "launcher/option_table.h"
#include "store/rdzv_cli.h"

namespace fs = std::filesystem;
using cxxrun::launcher::OptionSpec;

namespace {

// One option as every output needs it, whichever program it belongs to.
struct Doc {
  std::vector<std::string> names;  // every spelling: "-r", "--redirects"
  std::string metavar;             // empty: a flag
  bool value_optional = false;     // --opt[=VALUE]
  std::string help;
  std::string def;                 // default, as shown
  std::string env;                 // the variable it also reads
  std::vector<std::string> choices;  // from a {a,b,c} metavar
  std::string section;             // the --help group it is listed under
};

std::vector<std::string> choices_of(const std::string& metavar) {
  std::vector<std::string> out;
  if (metavar.size() < 2 || metavar.front() != '{' || metavar.back() != '}') return out;
  std::stringstream in(metavar.substr(1, metavar.size() - 2));
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

std::vector<Doc> cxxrun_docs() {
  using cxxrun::launcher::EnvFallback;
  std::vector<Doc> out;
  for (const OptionSpec& spec : cxxrun::launcher::option_table()) {
    Doc d;
    for (auto name : cxxrun::launcher::spellings_of(spec)) d.names.emplace_back(name);
    d.metavar = std::string(spec.metavar);
    d.value_optional = spec.bare_value != nullptr;
    d.help = std::string(spec.help);
    if (spec.default_value != nullptr && *spec.default_value != '\0') d.def = spec.default_value;
    if (spec.env != EnvFallback::none) d.env = cxxrun::launcher::env_name_of(spec);
    d.choices = choices_of(d.metavar);
    d.section = std::string(cxxrun::launcher::group_title(spec.group));
    out.push_back(d);
  }
  return out;
}

std::vector<Doc> rdzv_docs() {
  cxxrun::store::RdzvSettings settings;
  auto app = cxxrun::store::make_rdzv_cli(settings);
  std::vector<Doc> out;
  for (const CLI::Option* opt : app->get_options()) {
    Doc d;
    for (const auto& s : opt->get_snames()) d.names.push_back("-" + s);
    for (const auto& l : opt->get_lnames()) d.names.push_back("--" + l);
    if (opt->get_type_size() != 0) {
      d.metavar = opt->get_type_name();
      d.metavar = d.metavar.substr(0, d.metavar.find(':'));  // "UINT:INT in [...]" -> "UINT"
    }
    d.help = opt->get_description();
    d.env = opt->get_envname();
    d.section = "options";
    out.push_back(d);
  }
  return out;
}

std::vector<Doc> ctl_docs() {
  std::vector<Doc> out;
  for (const cxxrun::ctl::OptionDoc& o : cxxrun::ctl::option_docs()) {
    Doc d;
    std::stringstream names{std::string(o.names)};
    for (std::string n; std::getline(names, n, ',');) d.names.push_back(n);
    d.metavar = std::string(o.metavar);
    d.help = std::string(o.help) + ".";  // --help's lines end without one; a page's sentences with
    d.env = std::string(o.env);
    std::stringstream choices{std::string(o.choices)};
    for (std::string c; std::getline(choices, c, ',');) d.choices.push_back(c);
    d.section = "options";
    out.push_back(d);
  }
  return out;
}

std::vector<std::string> ctl_commands() {
  std::vector<std::string> out;
  for (const auto& c : cxxrun::ctl::command_docs()) out.emplace_back(c.name);
  return out;
}

// roff text: a backslash is \e, a hyphen-minus \- (so it copies as '-'),
// and a line may not start with a control character.
std::string roff(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '\\') out += "\\e";
    else if (c == '-') out += "\\-";
    else out += c;
  }
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) out.insert(0, "\\&");
  return out;
}

struct Page {
  std::string name, summary, synopsis, description, environment, exit_status, see_also;
};

void write_man(const fs::path& path, const Page& page, const std::vector<Doc>& docs, const std::string& version) {
  std::ofstream out(path);
  std::string upper = page.name;
  for (char& c : upper) c = static_cast<char>(toupper(static_cast<unsigned char>(c)));
  out << ".TH " << roff(upper) << " 1 \"\" \"cxxrun " << version << "\" \"User Commands\"\n"
      << ".SH NAME\n" << roff(page.name) << " \\- " << roff(page.summary) << "\n"
      << ".SH SYNOPSIS\n" << page.synopsis << "\n"
      << ".SH DESCRIPTION\n" << roff(page.description) << "\n"
      << ".SH OPTIONS\n";
  std::string section;
  for (const Doc& d : docs) {
    if (d.section != section && d.section != "options") out << ".SS " << roff(d.section) << "\n";
    section = d.section;
    out << ".TP\n";
    for (size_t i = 0; i < d.names.size(); ++i) {
      out << (i ? ", " : "") << "\\fB" << roff(d.names[i]) << "\\fR";
      if (d.value_optional) out << "[=\\fI" << roff(d.metavar) << "\\fR]";
      else if (!d.metavar.empty()) out << " \\fI" << roff(d.metavar) << "\\fR";
    }
    out << "\n" << roff(d.help);
    if (!d.def.empty()) out << " Default: " << roff(d.def) << ".";
    if (!d.env.empty()) out << " Environment: \\fB" << roff(d.env) << "\\fR.";
    out << "\n";
  }
  out << ".SH ENVIRONMENT\n" << roff(page.environment) << "\n"
      << ".SH EXIT STATUS\n" << roff(page.exit_status) << "\n"
      << ".SH SEE ALSO\n" << page.see_also << "\n";
}

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : " ") + s;
  return out;
}

// Bash: every spelling after a '-', a fixed set's values after its option,
// files otherwise; nothing of cxxrun's own once the program word or '--'
// has come (`positional`: the program's arguments follow it); `commands`
// (cxxrunctl's): a word that is not an option completes from them.
void write_bash(const fs::path& path, const std::string& prog, const std::vector<Doc>& docs, bool positional,
                const std::vector<std::string>& commands = {}) {
  std::vector<std::string> all, with_value;
  std::ostringstream cases;
  for (const Doc& d : docs) {
    for (const auto& n : d.names) {
      all.push_back(n);
      if (!d.metavar.empty() && !d.value_optional) with_value.push_back(n);
    }
    if (!d.choices.empty() && !d.value_optional)
      for (const auto& n : d.names)
        cases << "    " << n << ") COMPREPLY=($(compgen -W \"" << joined(d.choices) << "\" -- \"$cur\")); return ;;\n";
  }
  std::string fn = "_" + prog;
  for (char& c : fn)
    if (c == '-') c = '_';
  std::ofstream out(path);
  out << "# bash completion for " << prog << " (generated by cxxrun's docgen from its option table)\n"
      << fn << "() {\n"
      << "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" prev=\"${COMP_WORDS[COMP_CWORD-1]}\" i w\n"
      << "  local with_value=\" " << joined(with_value) << " \"\n";
  if (positional)
    out << "  for ((i = 1; i < COMP_CWORD; i++)); do\n"
        << "    w=\"${COMP_WORDS[i]}\"\n"
        << "    if [[ \"$w\" == -- || \"$w\" != -* ]]; then compopt -o default 2>/dev/null; COMPREPLY=(); return; fi\n"
        << "    [[ \"$w\" != *=* && \"$with_value\" == *\" $w \"* ]] && ((i++))\n"
        << "  done\n";
  out << "  case \"$prev\" in\n" << cases.str() << "  esac\n"
      << "  if [[ \"$with_value\" == *\" $prev \"* ]]; then compopt -o default 2>/dev/null; COMPREPLY=(); return; fi\n"
      << "  if [[ \"$cur\" == -* ]]; then COMPREPLY=($(compgen -W \"" << joined(all) << "\" -- \"$cur\")); return; fi\n";
  if (!commands.empty())
    out << "  COMPREPLY=($(compgen -W \"" << joined(commands) << "\" -- \"$cur\")); return\n";
  out << "  compopt -o default 2>/dev/null; COMPREPLY=()\n"
      << "}\n"
      << "complete -F " << fn << " " << prog << "\n";
}

// zsh's _arguments, inside single quotes: an explanation escapes brackets
// and backslashes, a message colons and backslashes.
std::string zsh_text(const std::string& text, const char* special = "[]\\") {
  std::string out;
  for (char c : text) {
    if (std::string_view(special).find(c) != std::string_view::npos) out += '\\';
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out;
}

void write_zsh(const fs::path& path, const std::string& prog, const std::vector<Doc>& docs, bool positional,
               const std::vector<std::string>& commands = {}) {
  std::ofstream out(path);
  out << "#compdef " << prog << "\n"
      << "# zsh completion for " << prog << " (generated by cxxrun's docgen from its option table)\n"
      << "_arguments -S \\\n";
  for (const Doc& d : docs)
    for (const auto& n : d.names) {
      std::string help = d.help.substr(0, d.help.find(". "));
      out << "  '" << n;
      if (d.value_optional) out << "=-";
      else if (!d.metavar.empty()) out << (n.size() > 2 ? "=" : "+");
      out << "[" << zsh_text(help) << "]";
      if (!d.metavar.empty()) {
        out << ":" << zsh_text(d.metavar, ":\\") << ":";
        out << (d.choices.empty() ? "_files" : "(" + joined(d.choices) + ")");
      }
      out << "' \\\n";
    }
  if (positional) out << "  '1:training program:_files' \\\n  '*::arguments:_normal'\n";
  else if (!commands.empty()) out << "  '1:command:(" << joined(commands) << ")'\n";
  else out << "  && return 0\n";
}

Page cxxrun_page() {
  Page p;
  p.name = "cxxrun";
  p.summary = "torchrun-compatible launcher for distributed training";
  p.synopsis = ".B cxxrun\n[\\fIoptions\\fR] \\fItraining_script\\fR [\\fIargs\\fR ...]";
  p.description =
      "cxxrun takes torchrun's command line, starts --nproc-per-node workers of the training program on this "
      "node with torchrun's environment (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT, "
      "TORCHELASTIC_*), meets the other nodes of the job through a rendezvous (static, c10d, or etcd), watches "
      "the workers, stops the whole job on the first failure and restarts it up to --max-restarts times. Both "
      "spellings of each option (--nproc-per-node and --nproc_per_node) are accepted, and a long option may be "
      "shortened to any prefix that names one option.";
  p.environment =
      "An option with a value also reads PET_<NAME> (for example PET_NPROC_PER_NODE=4), named under each option "
      "above; the command line wins. --shutdown-timeout reads TORCH_ELASTIC_SHUTDOWN_TIMEOUT, --tty reads "
      "CXXRUN_TTY, --inject-fault reads CXXRUN_INJECT_FAULTS. Under Slurm, with no layout flags, the job's "
      "layout comes from the SLURM_* variables (--no-slurm turns that off).";
  p.exit_status =
      "0 when every worker exited 0 (or a spare was released); the first failed worker's exit code, or 128 + "
      "its signal, when no restarts are left; 127 when a worker could not be executed; 128 + the signal when "
      "the agent received SIGINT, SIGTERM, SIGHUP or SIGQUIT; 2 for bad input, with one line; 1 when the "
      "rendezvous failed, too few nodes are left or the rendezvous store was lost; 137 for a hung worker.";
  p.see_also = ".BR cxxrun\\-rdzv (1)";
  return p;
}

Page rdzv_page() {
  Page p;
  p.name = "cxxrun-rdzv";
  p.summary = "standalone TCPStore-compatible rendezvous store";
  p.synopsis = ".B cxxrun\\-rdzv\n\\fB\\-\\-port\\fR \\fIPORT\\fR [\\fIoptions\\fR]";
  p.description =
      "cxxrun-rdzv serves the rendezvous of cxxrun jobs (and torch's own TCPStore clients) from a host of its "
      "own, so that the rendezvous outlives every training node: agents reach it with --rdzv-backend=c10d "
      "--rdzv-endpoint=HOST:PORT --rdzv-conf is_host=false. It listens on loopback unless --host says otherwise. "
      "It runs as a systemd service (cxxrun-rdzv.service), configured in /etc/default/cxxrun-rdzv.";
  p.environment =
      "Each option also reads the variable named under it; the command line wins. CREDENTIALS_DIRECTORY: with "
      "no token file named, the token in $CREDENTIALS_DIRECTORY/token (systemd's LoadCredential=token:PATH). "
      "JOURNAL_STREAM: when set (stderr on the journal), each line starts with its syslog priority and carries "
      "no time stamp of its own.";
  p.exit_status = "0 after SIGINT or SIGTERM; 2 for bad input, with one line; 1 when the port cannot be bound.";
  p.see_also = ".BR cxxrun (1)";
  return p;
}

Page ctl_page() {
  Page p;
  p.name = "cxxrunctl";
  p.summary = "the control tool of a running cxxrun job";
  p.synopsis = ".B cxxrunctl\n[\\fIoptions\\fR] \\fIcommand\\fR";
  p.description = "cxxrunctl attaches to a running cxxrun job through its rendezvous store (c10d or etcd), with "
                  "the job's token, and shows or stops it. Commands:";
  for (const auto& c : cxxrun::ctl::command_docs())
    p.description += std::string(" ") + std::string(c.name) + (c.args.empty() ? "" : " " + std::string(c.args)) +
                     ": " + std::string(c.help) + ";";
  p.description.back() = '.';
  p.description += " Without the job's token the store refuses it, and nothing is read or stopped.";
  p.environment =
      "PET_RDZV_ENDPOINT, PET_RDZV_ID, PET_RDZV_BACKEND and PET_RDZV_CONF, as cxxrun reads them, where the "
      "option is not given; the command line wins.";
  p.exit_status =
      "0 done; 2 bad input, with one line; 3 the job's store cannot be reached; 4 the job's store refused this "
      "client (its token, or etcd's login); 5 no agent of that job is on the board; 6 some nodes did not answer "
      "or show a stop in time.";
  p.see_also = ".BR cxxrun (1)";
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: docgen OUTDIR VERSION\n";
    return 2;
  }
  const fs::path dir = argv[1];
  const std::string version = argv[2];
  for (const char* sub : {"man/man1", "bash-completion/completions", "zsh/vendor-completions"})
    fs::create_directories(dir / sub);
  const auto cxxrun = cxxrun_docs(), rdzv = rdzv_docs();
  write_man(dir / "man/man1/cxxrun.1", cxxrun_page(), cxxrun, version);
  write_man(dir / "man/man1/cxxrun-rdzv.1", rdzv_page(), rdzv, version);
  write_bash(dir / "bash-completion/completions/cxxrun", "cxxrun", cxxrun, true);
  write_bash(dir / "bash-completion/completions/cxxrun-rdzv", "cxxrun-rdzv", rdzv, false);
  write_zsh(dir / "zsh/vendor-completions/_cxxrun", "cxxrun", cxxrun, true);
  write_zsh(dir / "zsh/vendor-completions/_cxxrun-rdzv", "cxxrun-rdzv", rdzv, false);
  const auto ctl = ctl_docs();
  write_man(dir / "man/man1/cxxrunctl.1", ctl_page(), ctl, version);
  write_bash(dir / "bash-completion/completions/cxxrunctl", "cxxrunctl", ctl, false, ctl_commands());
  write_zsh(dir / "zsh/vendor-completions/_cxxrunctl", "cxxrunctl", ctl, false, ctl_commands());
  return 0;
}
