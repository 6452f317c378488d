#include "ctl/options.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "net/endpoint.h"
#include "rendezvous/etcd_endpoints.h"
#include "store/auth.h"

namespace cxxrun::ctl {
namespace {

using rendezvous::Backend;

// A value and where it came from, for messages: "--rdzv-id=x" or "PET_RDZV_ID=x".
struct Given {
  std::string text;
  std::string origin;
  std::string shown() const { return origin + "=" + text; }
};

// "--rdzv_id" and "--rdzv-id" are one option, as in torchrun.
std::string canonical(std::string name) {
  for (char& c : name)
    if (c == '_') c = '-';
  return name;
}

std::chrono::milliseconds seconds_of(const Given& g, bool zero_ok) {
  size_t used = 0;
  double secs = 0;
  try {
    secs = std::stod(g.text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != g.text.size() || !std::isfinite(secs) || secs < 0 || (!zero_ok && secs == 0) || secs > 86400)
    throw UsageError(g.shown() + ": must be a positive number of seconds, at most 86400");
  return std::chrono::milliseconds(std::llround(secs * 1000));
}

// torchrun's --rdzv-conf: "k1=v1,k2=v2".
std::map<std::string, std::string> conf_of(const Given& g) {
  std::map<std::string, std::string> out;
  size_t start = 0;
  while (start <= g.text.size() && !g.text.empty()) {
    size_t comma = g.text.find(',', start);
    if (comma == std::string::npos) comma = g.text.size();
    const std::string item = g.text.substr(start, comma - start);
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      throw UsageError(g.shown() + ": '" + item + "' is not KEY=VALUE (the form is k1=v1,k2=v2)");
    out[item.substr(0, eq)] = item.substr(eq + 1);
    start = comma + 1;
  }
  return out;
}

const std::map<std::string, std::string>& env_names() {
  static const std::map<std::string, std::string> names{{"--rdzv-endpoint", "PET_RDZV_ENDPOINT"},
                                                        {"--rdzv-id", "PET_RDZV_ID"},
                                                        {"--rdzv-backend", "PET_RDZV_BACKEND"},
                                                        {"--rdzv-conf", "PET_RDZV_CONF"}};
  return names;
}

}  // namespace

std::optional<std::string> real_getenv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

namespace {

constexpr CommandDoc kCommands[] = {
    {"status", "[--json]", "every node and rank: host, pid, state, attempt, restarts, ages, causes"},
    {"top", "[--interval S] [-n N]", "status as a live view, one line a rank, the stalest first (q quits)"},
    {"logs", "[--rank R] [--follow]", "every rank's latest output across nodes, merged by time, rank-prefixed"},
    {"stacks", "[--rank R]", "every rank's stack now, across nodes, then where the ranks wait, grouped"},
    {"stop", "", "a graceful stop of the whole job, as SIGTERM on every agent (exit 143)"},
};

constexpr OptionDoc kOptions[] = {
    {"--rdzv-endpoint,--rdzv_endpoint", "HOST[:PORT]", "PET_RDZV_ENDPOINT", "",
     "the job's rendezvous; etcd: its members, comma-separated"},
    {"--rdzv-id,--rdzv_id", "ID", "PET_RDZV_ID", "", "the job's run id (default: none)"},
    {"--rdzv-backend,--rdzv_backend", "NAME", "PET_RDZV_BACKEND", "c10d,etcd-v3,etcd,etcd-v2",
     "c10d (default) or etcd-v3, etcd, etcd-v2"},
    {"--rdzv-conf,--rdzv_conf", "K=V,...", "PET_RDZV_CONF", "",
     "token_file, read_timeout, etcd's protocol, cacert, cert, key, etcd_prefix"},
    {"--token-file,--token_file", "PATH", "", "",
     "the job's store token (the same as --rdzv-conf token_file=PATH; etcd: a user's NAME:PASSWORD)"},
    {"--timeout", "S", "", "", "the deadline of the connect and of each request (default 10)"},
    {"--json", "", "", "", "status: one line of JSON"},
    {"--interval", "S", "", "", "top: seconds between frames (default 1)"},
    {"-n", "N", "", "", "top: stop after N frames"},
    {"--rank", "R", "", "", "logs, stacks: rank R only"},
    {"--follow,-f", "", "", "", "logs: keep asking, about every second, until Ctrl-C or the job ends"},
    {"--help,-h", "", "", "", "this text"},
};

// The spellings of `d`.
std::vector<std::string_view> spellings(const OptionDoc& d) {
  std::vector<std::string_view> out;
  for (std::string_view rest = d.names; !rest.empty();) {
    const size_t comma = rest.find(',');
    out.push_back(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
  }
  return out;
}

// The row of `name` ("--rdzv_id" spells "--rdzv-id"), or nullptr.
const OptionDoc* row_of(const std::string& name) {
  for (const OptionDoc& d : kOptions)
    for (std::string_view s : spellings(d))
      if (s == name) return &d;
  return nullptr;
}

std::string padded(std::string text, size_t width) {
  if (text.size() < width) text.resize(width, ' ');
  else text += "  ";
  return text;
}

}  // namespace

std::span<const OptionDoc> option_docs() { return kOptions; }
std::span<const CommandDoc> command_docs() { return kCommands; }

std::string usage() {
  std::string out =
      "usage: cxxrunctl [options] COMMAND\n"
      "\n"
      "Attaches to a running cxxrun job through its rendezvous (c10d or etcd) and shows or stops it.\n"
      "\n"
      "commands:\n";
  for (const CommandDoc& c : kCommands)
    out += "  " + padded(std::string(c.name) + (c.args.empty() ? "" : " " + std::string(c.args)), 27) +
           std::string(c.help) + "\n";
  out += "\noptions (and their environment fallbacks, as cxxrun reads them):\n";
  for (const OptionDoc& d : kOptions) {
    const std::string_view main = spellings(d).front();
    std::string left = std::string(main) + (d.metavar.empty() ? "" : " " + std::string(d.metavar));
    for (std::string_view s : spellings(d))
      if (s.size() == 2 && s != main) left += ", " + std::string(s);  // a short spelling: -f
    out += "  " + padded(left, 30) + std::string(d.help) + (d.env.empty() ? "" : " (" + std::string(d.env) + ")") +
           "\n";
  }
  out +=
      "\n"
      "exit codes: 0 done, 2 bad input, 3 the job cannot be reached, 4 the job's store refused this client\n"
      "(its token), 5 no agent of that job is on the board, 6 some nodes did not answer or stop in time\n";
  return out;
}

Options parse(const std::vector<std::string>& args, const Getenv& env) {
  Options o;
  std::map<std::string, Given> given;
  std::optional<Given> command;
  auto needs_value = [&](const std::string& name) {
    const OptionDoc* row = row_of(name);
    return row != nullptr && !row->metavar.empty();
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") {
      o.command = Command::help;
      return o;
    }
    if (a.size() > 1 && a[0] == '-') {
      const size_t eq = a.find('=');
      std::string name = canonical(a.substr(0, eq));
      if (name == "--json" || name == "--follow" || name == "-f") {
        if (eq != std::string::npos) throw UsageError(a + ": takes no value");
        (name == "--json" ? o.json : o.follow) = true;
        continue;
      }
      if (!needs_value(name)) throw UsageError(a + ": unknown option (cxxrunctl --help lists them)");
      std::string value;
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
      } else {
        if (i + 1 >= args.size()) throw UsageError(a + ": needs a value");
        value = args[++i];
      }
      given[name] = Given{value, name};
      continue;
    }
    if (command) throw UsageError("'" + a + "': one command at a time (already given: " + command->text + ")");
    command = Given{a, "command"};
  }
  if (!command) throw UsageError("no command given (status, top, logs, stacks or stop; cxxrunctl --help)");
  if (command->text == "status") o.command = Command::status;
  else if (command->text == "top") o.command = Command::top;
  else if (command->text == "stop") o.command = Command::stop;
  else if (command->text == "logs") o.command = Command::logs;
  else if (command->text == "stacks") o.command = Command::stacks;
  else
    throw UsageError("'" + command->text + "': unknown command (choose from status, top, logs, stacks, stop)");
  if (o.follow && o.command != Command::logs) throw UsageError("--follow: only logs takes it");
  if (given.count("--rank")) {
    const Given& r = given["--rank"];
    if (o.command != Command::logs && o.command != Command::stacks)
      throw UsageError(r.shown() + ": only logs and stacks take it");
    size_t used = 0;
    int v = -1;
    try {
      v = std::stoi(r.text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != r.text.size() || v < 0) throw UsageError(r.shown() + ": must be a rank, 0 or more");
    o.rank = v;
  }
  if (o.json && o.command != Command::status) throw UsageError("--json: only status takes it");
  if ((given.count("--interval") || given.count("-n")) && o.command != Command::top)
    throw UsageError((given.count("-n") ? given["-n"] : given["--interval"]).shown() + ": only top takes it");

  // The command line first, then PET_*.
  for (const auto& [option, var] : env_names())
    if (!given.count(option))
      if (auto v = env(var)) given[option] = Given{*v, var};
  auto value = [&](const std::string& option, const std::string& fallback) {
    auto it = given.find(option);
    return it == given.end() ? Given{fallback, option} : it->second;
  };

  const Given backend = value("--rdzv-backend", "c10d");
  if (backend.text == "c10d") o.rdzv.backend = Backend::c10d;
  else if (backend.text == "etcd-v3" || backend.text == "etcd" || backend.text == "etcd-v2") o.rdzv.backend = Backend::etcd;
  else if (backend.text == "static")
    throw UsageError(backend.shown() + ": a job with the static rendezvous has no rendezvous store to attach to "
                     "(cxxrunctl attaches to c10d and etcd-v3 jobs)");
  else
    throw UsageError(backend.shown() + ": unknown rendezvous backend (choose from c10d, etcd-v3, etcd, etcd-v2)");

  auto& s = o.rdzv.settings;
  const Given id = value("--rdzv-id", "none");
  if (id.text.empty() || id.text.find('/') != std::string::npos)
    throw UsageError(id.shown() + ": the run id must be non-empty, without '/'");
  s.run_id = id.text;

  if (given.count("--timeout")) o.timeout = seconds_of(given["--timeout"], false);
  s.read_timeout = o.timeout;
  if (given.count("--interval")) o.interval = std::max(std::chrono::milliseconds(100), seconds_of(given["--interval"], false));
  if (given.count("-n")) {
    const Given& n = given["-n"];
    size_t used = 0;
    int v = 0;
    try {
      v = std::stoi(n.text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != n.text.size() || v <= 0) throw UsageError(n.shown() + ": must be a positive number of frames");
    o.iterations = v;
  }

  std::map<std::string, std::string> conf;
  if (given.count("--rdzv-conf")) conf = conf_of(given["--rdzv-conf"]);
  if (given.count("--token-file")) {
    if (conf.count("token_file"))
      throw UsageError(given["--token-file"].shown() + ": the token is given twice (also --rdzv-conf token_file)");
    conf["token_file"] = given["--token-file"].text;
  }
  try {
    rendezvous::apply_rdzv_conf(conf, s);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (given.count("--timeout") == 0 && conf.count("read_timeout")) o.timeout = s.read_timeout;

  const Given endpoint = value("--rdzv-endpoint", "");
  if (endpoint.text.empty())
    throw UsageError("no job named: give --rdzv-endpoint=HOST[:PORT] (or PET_RDZV_ENDPOINT), as the job's cxxrun got it");
  if (o.rdzv.backend == Backend::c10d) {
    try {
      const net::Endpoint e = net::parse_endpoint(endpoint.text, rendezvous::kDefaultC10dPort);
      o.rdzv.host = e.host;
      o.rdzv.port = e.port;
    } catch (const std::invalid_argument& e) {
      throw UsageError(endpoint.shown() + ": " + e.what());
    }
    if (o.rdzv.port == 0) throw UsageError(endpoint.shown() + ": the port must be in 1..65535");
    s.endpoint = net::format_endpoint({o.rdzv.host, o.rdzv.port});
  } else {
    try {
      s.etcd.endpoints = rendezvous::parse_etcd_endpoints({endpoint.text}, s.etcd.https);
    } catch (const std::invalid_argument& e) {
      throw UsageError(endpoint.shown() + ": " + e.what());
    }
    o.rdzv.host = s.etcd.endpoints.front().host;
    o.rdzv.port = s.etcd.endpoints.front().port;
    s.endpoint = endpoint.text;
    if (s.etcd.cert.empty() != s.etcd.key.empty())
      throw UsageError("--rdzv-conf: cert and key go together (a client certificate and its key)");
    // With etcd the token file holds an etcd user's NAME:PASSWORD, as for cxxrun.
    if (!s.token.empty()) {
      const size_t colon = s.token.find(':');
      if (colon == 0 || colon == std::string::npos || colon + 1 == s.token.size())
        throw UsageError("token_file: with etcd, it holds an etcd user's credentials as NAME:PASSWORD on one line");
      s.etcd.username = s.token.substr(0, colon);
      s.etcd.password = s.token.substr(colon + 1);
      s.token.clear();
    }
  }
  return o;
}

}  // namespace cxxrun::ctl
