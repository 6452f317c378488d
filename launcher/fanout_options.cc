#include "launcher/fanout_options.h"

#include <random>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "agent/config.h"
#include "launcher/errors.h"
#include "launcher/option_table.h"
#include "launcher/raw_options.h"
#include "launcher/rendezvous_choice.h"
#include "launcher/shell_words.h"
#include "launcher/values.h"
#include "net/endpoint.h"
#include "rendezvous/rendezvous.h"

namespace cxxrun::launcher {
namespace {

// Options the launcher itself reads, and those it writes for every host:
// never passed through as the user gave them.
const std::set<std::string, std::less<>> kNotPassed = {
    "help", "version", "hostfile", "hosts", "rsh", "remote_cxxrun", "token_out", "from_launcher", "standalone",
    "nnodes", "rdzv_backend", "rdzv_endpoint", "rdzv_id", "nproc_per_node", "rdzv_conf",
};

// 32 random bytes as hex: the store's shared secret for this one job.
std::string fresh_token() {
  std::random_device random;  // getrandom(2) on Linux
  std::string out;
  for (int i = 0; i < 8; ++i) out += fmt::format("{:08x}", static_cast<uint32_t>(random()));
  return out;
}

// The user's options as flags, in the table's order.
std::vector<std::string> passed_options(const RawOptions& raw) {
  std::vector<std::string> out;
  for (const OptionSpec& spec : option_table()) {
    const std::string dest = dest_of(spec);
    if (kNotPassed.count(dest) > 0) continue;
    const std::string name = main_name_of(spec);
    if (spec.is_flag()) {
      if (raw.flag(dest)) out.push_back(name);
    } else if (spec.repeatable) {
      for (const RawValue& v : raw.list(dest)) {
        // PET_<DEST> holds one comma-separated list; a flag holds one item.
        if (v.origin.starts_with("PET_"))
          for (std::string_view item : split(v.text, ',')) out.push_back(name + "=" + std::string(item));
        else
          out.push_back(name + "=" + v.text);
      }
    } else if (raw.was_given(dest)) {
      out.push_back(name + "=" + raw.at(dest).text);
    }
  }
  return out;
}

double seconds_or(const RawOptions& raw, std::string_view dest, double fallback) {
  const RawValue* v = raw.find(dest);
  if (v == nullptr) return fallback;
  std::optional<double> n = number_of(v->text);
  return n && *n >= 0 ? *n : fallback;
}

std::vector<Host> hosts_of(const RawOptions& raw) {
  const RawValue* file = raw.find("hostfile");
  const RawValue* list = raw.find("hosts");
  if (file && list)
    throw UsageError(fmt::format("{} and {}: give the hosts one way, a file or a list", file->shown(),
                                 list->shown()));
  if (file) return read_hostfile(file->text, file->shown());
  return parse_hosts_list(list->text, list->shown());
}

}  // namespace

bool wants_fanout(const RawOptions& raw) { return raw.find("hostfile") || raw.find("hosts"); }

FanoutPlan plan_fanout(const RawOptions& raw, const std::string& self) {
  FanoutPlan plan;
  const RawValue* any_hosts = raw.find("hostfile") ? raw.find("hostfile") : raw.find("hosts");
  if (raw.flag("from_launcher"))
    throw UsageError(any_hosts->shown() + ": --from-launcher is the remote agents' own flag; a launcher "
                     "starts them, not another launcher");
  if (raw.flag("standalone"))
    throw UsageError(any_hosts->shown() + ": --standalone runs a single node; drop it to start one agent per host");
  plan.hosts = hosts_of(raw);
  const int n = static_cast<int>(plan.hosts.size());
  if (!raw.has_program)
    throw UsageError("missing the training program: cxxrun --hostfile=FILE [options] training_script [args...]");

  const RawValue& rsh = raw.at("rsh");
  try {
    plan.rsh = split_shell_words(rsh.text);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{}: {} (it is split as a shell would split it)", rsh.shown(), e.what()));
  }
  if (plan.rsh.empty()) throw UsageError(rsh.shown() + ": no command (e.g. --rsh='ssh -p 2222')");

  std::string backend = "c10d";
  if (raw.was_given("rdzv_backend")) {
    backend = raw.at("rdzv_backend").text;
    if (backend == "static")
      throw UsageError(raw.at("rdzv_backend").shown() + ": the agents a launcher starts meet by c10d or etcd "
                       "(the static backend needs each host's --node-rank)");
  }

  if (raw.was_given("nnodes")) {
    const auto [lo, hi] = parse_nnodes(raw.at("nnodes"));
    if (lo > n)
      throw UsageError(fmt::format("{}: needs at least {} nodes, and {} names {} host{}", raw.at("nnodes").shown(),
                                   lo, any_hosts->shown(), n, n == 1 ? "" : "s"));
    plan.min_nodes = lo;
    plan.max_nodes = hi;
  } else {
    plan.min_nodes = plan.max_nodes = n;
  }
  const std::string nnodes = raw.was_given("nnodes") ? raw.at("nnodes").text : std::to_string(n);

  std::string conf = raw.was_given("rdzv_conf") ? raw.at("rdzv_conf").text : "";
  const std::map<std::string, std::string> conf_keys =
      raw.was_given("rdzv_conf") ? parse_rdzv_conf(raw.at("rdzv_conf")) : std::map<std::string, std::string>{};
  if (raw.was_given("rdzv_endpoint")) {
    plan.endpoint = raw.at("rdzv_endpoint").text;
  } else {
    if (backend != "c10d")
      throw UsageError(raw.at("rdzv_backend").shown() + ": needs --rdzv-endpoint (the etcd members)");
    plan.endpoint = net::format_endpoint({plan.hosts.front().name, rendezvous::kDefaultC10dPort});
    plan.first_host_is_store = true;
  }
  // The token protects a store an agent of this job hosts: the one chosen
  // here, or the user's endpoint on one of the hosts. A store elsewhere has
  // its own secret (token_file), and etcd's token_file is a user's login.
  bool ours = plan.first_host_is_store;
  if (!ours && backend == "c10d") {
    try {
      const std::string host = net::parse_endpoint(plan.endpoint, rendezvous::kDefaultC10dPort).host;
      for (const Host& h : plan.hosts) ours = ours || h.name == host;
    } catch (const std::invalid_argument& e) {
      throw UsageError(raw.at("rdzv_endpoint").shown() + ": " + e.what());
    }
  }
  if (ours && conf_keys.count("token_file") == 0) plan.token = fresh_token();
  if (const RawValue* out = raw.find("token_out")) {
    if (out->text.empty()) throw UsageError(out->shown() + ": empty (the file to write the job's token to)");
    if (plan.token.empty())
      throw UsageError(out->shown() + ": this launch makes no token to write: " +
                       (conf_keys.count("token_file") ? "the job's token is your token_file's"
                        : backend != "c10d"          ? "an etcd job's store is etcd, with its own users"
                                                     : "the store at " + plan.endpoint + " is none of the hosts'"));
    plan.token_out = out->text;
  }
  plan.run_id = raw.was_given("rdzv_id") ? raw.at("rdzv_id").text : random_uuid4();

  const RawValue* remote = raw.find("remote_cxxrun");
  const std::string program = remote ? remote->text : self;
  if (program.empty()) throw UsageError(remote->shown() + ": empty (the path of cxxrun on the hosts)");
  const std::vector<std::string> options = passed_options(raw);
  for (int i = 0; i < n; ++i) {
    const Host& host = plan.hosts[static_cast<size_t>(i)];
    std::vector<std::string> words{program, "--from-launcher"};
    words.insert(words.end(), options.begin(), options.end());
    words.push_back("--nnodes=" + nnodes);
    words.push_back("--rdzv-backend=" + backend);
    words.push_back("--rdzv-endpoint=" + plan.endpoint);
    words.push_back("--rdzv-id=" + plan.run_id);
    if (raw.was_given("nproc_per_node"))
      words.push_back("--nproc-per-node=" + raw.at("nproc_per_node").text);
    else if (host.slots)
      words.push_back("--nproc-per-node=" + std::to_string(*host.slots));
    std::string host_conf = conf;
    // Said, not inferred from the name: a host list may name the first host
    // by an alias its own agent would not know as itself.
    if (plan.first_host_is_store && conf_keys.count("is_host") == 0)
      host_conf += std::string(host_conf.empty() ? "" : ",") + (i == 0 ? "is_host=true" : "is_host=false");
    if (!host_conf.empty()) words.push_back("--rdzv-conf=" + host_conf);
    words.push_back("--");
    words.push_back(raw.program);
    words.insert(words.end(), raw.program_args.begin(), raw.program_args.end());
    plan.commands.push_back(std::move(words));
  }
  plan.stop_deadline_s =
      seconds_or(raw, "shutdown_timeout", static_cast<double>(agent::kDefaultShutdownTimeout.count())) +
      seconds_or(raw, "kill_timeout", static_cast<double>(agent::kDefaultKillTimeout.count())) + 30;
  return plan;
}

}  // namespace cxxrun::launcher
