#include "launcher/rendezvous_choice.h"

#include <map>
#include <stdexcept>
#include <system_error>

#include <boost/uuid/random_generator.hpp>
#include <boost/uuid/uuid_io.hpp>
#include <fmt/format.h>

#include "launcher/values.h"
#include "rendezvous/etcd_endpoints.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/worker_store.h"
#include "net/endpoint.h"
#include "store/wire.h"

namespace cxxrun::launcher {
namespace {

namespace rdzv = cxxrun::rendezvous;
using rendezvous::Backend;

constexpr const char* kLoopback = "127.0.0.1";

net::Endpoint endpoint_of(const RawValue& v, int default_port) {
  try {
    return net::parse_endpoint(v.text, default_port);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{}: {}", v.shown(), e.what()));
  }
}

int free_port_on(const std::string& host) {
  try {
    return net::pick_free_port(host);
  } catch (const std::system_error& e) {
    throw std::runtime_error(fmt::format("cannot find a free port on {}: {}", host, e.what()));
  }
}

// --nnodes and --node-rank, whose syntax build_config has already checked.
struct Nodes {
  int min_nodes = 1;
  int max_nodes = 1;
  int node_rank = 0;
};

Nodes nodes_of(const RawOptions& raw) {
  auto [lo, hi] = parse_nnodes(raw.at("nnodes"));
  return {lo, hi, parse_int(raw.at("node_rank"))};
}

void check_single_node_rank(const RawOptions& raw, int node_rank) {
  if (node_rank != 0)
    throw UsageError(fmt::format("{}: must be 0 with {} (node ranks run 0..NNODES-1)",
                                 raw.at("node_rank").shown(), raw.at("nnodes").shown()));
}

net::Endpoint c10d_endpoint(const RawOptions& raw) {
  const RawValue& text = raw.at("rdzv_endpoint");
  if (text.text.empty())
    throw UsageError(raw.at("rdzv_backend").shown() + " needs --rdzv-endpoint=HOST[:PORT]");
  return endpoint_of(text, rdzv::kDefaultC10dPort);
}

// What every backend's rendezvous reads besides the --rdzv-conf timeouts.
void fill_settings(const RawOptions& raw, agent::Config& c, const Nodes& nodes,
                   const net::Endpoint& endpoint) {
  rdzv::RendezvousSettings& s = c.rdzv.settings;
  s.run_id = c.run_id;
  s.endpoint = net::format_endpoint(endpoint);
  s.min_nodes = nodes.min_nodes;
  s.max_nodes = nodes.max_nodes;
  s.local_world_size = c.nproc_per_node;
  s.entrypoint = c.entrypoint_name;
  const RawValue* local_addr = raw.find("local_addr");
  s.local_addr = local_addr != nullptr ? local_addr->text : "";
  // Not an option: only launcher/slurm.cc derives it.
  if (const RawValue* order = raw.find("node_order")) s.node_order = std::stoi(order->text);
}

// torch main's rule for a one-node job that names no port: a static
// backend by default, no endpoint, no --master-port (nor PET_MASTER_PORT).
// It runs as --standalone does, so two such jobs on a host never meet on 29500.
bool single_node_default(const RawOptions& raw, const Nodes& nodes) {
  return nodes.max_nodes == 1 && raw.at("rdzv_backend").text == "static" && raw.at("rdzv_endpoint").text.empty() &&
         raw.find("master_port") == nullptr;
}

// --standalone, and torch main's single-node default. The workers' store is
// on this machine: at --local-addr when given (torch makes it MASTER_ADDR,
// this node being rank 0), else loopback.
void standalone(const RawOptions& raw, agent::Config& c, const Nodes& nodes) {
  c.rdzv.backend = Backend::local;
  c.rdzv.name = "c10d";  // torch's --standalone is a one-node c10d rendezvous
  // --standalone replaces the id as torch's does; the single-node default
  // keeps one the user gave (torch replaces it there too: docs/torchrun-compat.md).
  c.run_id = raw.flag("standalone") || !raw.was_given("rdzv_id") ? random_uuid4() : raw.at("rdzv_id").text;
  c.master_addr = kLoopback;
  if (const RawValue* local = raw.find("local_addr")) {
    if (!net::is_local_host(local->text))
      throw UsageError(local->shown() + ": not an address of this machine; a one-node job's workers reach "
                       "their store there (MASTER_ADDR)");
    c.master_addr = local->text;
  }
  // 0: the agent settles MASTER_PORT when it starts (the rule is in
  // rendezvous/worker_store.h), so two jobs on a host never race for one.
  c.master_port = 0;
  c.rdzv.host = c.master_addr;
  c.rdzv.port = 0;
  fill_settings(raw, c, nodes, {c.master_addr, c.master_port});
}

void c10d(const RawOptions& raw, agent::Config& c, const Nodes& nodes,
          std::vector<std::string>& warnings) {
  net::Endpoint endpoint = c10d_endpoint(raw);
  if (endpoint.port == 0) {
    // torch's single-node idiom (what --standalone expands to): this agent
    // hosts the store on a port that is free now. Other nodes could not find it.
    if (!net::is_local_host(endpoint.host) || nodes.max_nodes != 1 || !c.rdzv.is_host.value_or(true))
      throw UsageError(raw.at("rdzv_endpoint").shown() +
                       ": port 0 only works for one node hosting its own store; give the port "
                       "the other nodes will use (default " + std::to_string(rdzv::kDefaultC10dPort) + ")");
    endpoint.port = free_port_on(endpoint.host);
  }
  c.rdzv.backend = Backend::c10d;
  c.rdzv.host = endpoint.host;
  c.rdzv.port = endpoint.port;
  c.run_id = raw.at("rdzv_id").text;
  // Group ranks and where rank 0's workers host their store come from the
  // rendezvous; the agent fills these in.
  c.master_addr.clear();
  c.master_port = 0;
  c.use_agent_store = false;
  fill_settings(raw, c, nodes, endpoint);
  if (nodes.node_rank != 0)
    warnings.push_back(raw.at("node_rank").shown() +
                       " is ignored: --node-rank is only used by the static backend");
}

bool is_etcd(const std::string& backend) {
  return backend == "etcd-v3" || backend == "etcd" || backend == "etcd-v2";
}

// "h1:2379,h2,[::1]:2379": every member, etcd's client port unless given,
// parsed here once by etcd's own parser through rendezvous/etcd_endpoints.h
// (a scheme, if given, must be the protocol's) and carried as
// rendezvous::EtcdEndpoints from here on.
std::vector<rdzv::EtcdEndpoint> etcd_endpoints(const RawOptions& raw) {
  const RawValue& text = raw.at("rdzv_endpoint");
  if (text.text.empty())
    throw UsageError(raw.at("rdzv_backend").shown() + " needs --rdzv-endpoint=HOST[:PORT][,HOST[:PORT]...] "
                     "naming etcd's members");
  for (size_t start = 0;;) {
    const size_t comma = text.text.find(',', start);
    if ((comma == std::string::npos ? text.text.size() : comma) == start)
      throw UsageError(text.shown() + ": an empty member in the list");
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  const auto conf = parse_rdzv_conf(raw.at("rdzv_conf"));
  const bool https = conf.count("protocol") && conf.at("protocol") == "https";
  try {
    return rdzv::parse_etcd_endpoints({text.text}, https);
  } catch (const std::invalid_argument& e) {
    throw UsageError(text.shown() + ": " + e.what());
  }
}

void etcd(const RawOptions& raw, agent::Config& c, const Nodes& nodes, std::vector<std::string>& notes) {
  const std::string& name = raw.at("rdzv_backend").text;
  if (name != "etcd-v3")
    notes.push_back(fmt::format("--rdzv-backend={} runs on cxxrun's etcd-v3 backend: etcd's v3 API, which every "
                                "etcd since 3.4 serves (torch's {} backend speaks v2)",
                                name, name));
  const std::vector<rdzv::EtcdEndpoint> members = etcd_endpoints(raw);
  c.rdzv.backend = Backend::etcd;
  c.rdzv.name = "etcd-v3";
  c.rdzv.host = members.front().host;
  c.rdzv.port = members.front().port;
  c.run_id = raw.at("rdzv_id").text;
  // As with c10d, the rendezvous decides group ranks and where rank 0's
  // workers host their store.
  c.master_addr.clear();
  c.master_port = 0;
  c.use_agent_store = false;
  fill_settings(raw, c, nodes, {members.front().host, members.front().port});
  rdzv::EtcdSettings& etcd = c.rdzv.settings.etcd;
  etcd.endpoints = members;
  std::string list;
  for (const auto& e : etcd.endpoints) list += (list.empty() ? "" : ",") + e.text();
  c.rdzv.settings.endpoint = (etcd.https ? "https://" : "http://") + list;
  if ((etcd.cert.empty()) != (etcd.key.empty()))
    throw UsageError(raw.at("rdzv_conf").shown() + ": cert and key go together (a client certificate and its key)");
}

void static_backend(const RawOptions& raw, agent::Config& c, const Nodes& nodes) {
  const RawValue& endpoint_text = raw.at("rdzv_endpoint");
  const RawValue default_port{std::to_string(store::wire::kDefaultPort), "--master-port"};
  const RawValue* origin = raw.find("master_port") != nullptr ? raw.find("master_port") : &default_port;
  net::Endpoint endpoint;
  if (!endpoint_text.text.empty()) {
    // torch's static backend: an explicit endpoint replaces master_addr:master_port.
    origin = &endpoint_text;
    endpoint = endpoint_of(endpoint_text, net::kNoPort);
    if (endpoint.port == net::kNoPort)
      throw UsageError(endpoint_text.shown() + ": port is missing; add :PORT or use --master-port");
    if (endpoint.port == 0) throw UsageError(endpoint_text.shown() + ": port must be in 1..65535");
  } else {
    endpoint = endpoint_of(raw.at("master_addr"), net::kNoPort);
    if (endpoint.port != net::kNoPort)
      throw UsageError(raw.at("master_addr").shown() + ": give the port with --master-port");
    endpoint.port = parse_port(*origin);
  }
  const int n = nodes.max_nodes;  // == min_nodes: check_rendezvous_supported
  // Several nodes: node 0's agent hosts the rendezvous store here, and a
  // taken port would only show up later, as a store failure. One node: the
  // agent's bind of the workers' store is the check (rendezvous::PortTaken),
  // with the same line: a look now could not see a job that starts in the
  // same instant.
  bool hosts_here = nodes.node_rank == 0 && n > 1 && net::is_local_host(endpoint.host);
  if (hosts_here && net::port_in_use(endpoint.host, endpoint.port))
    throw UsageError(rdzv::port_taken_message(origin->shown(), endpoint.port, endpoint.host, false));
  c.master_port_origin = origin->shown();

  c.run_id = raw.at("rdzv_id").text;
  c.master_addr = endpoint.host;
  c.master_port = endpoint.port;
  c.rdzv.host = endpoint.host;
  c.rdzv.port = endpoint.port;
  if (n == 1) {
    c.rdzv.backend = Backend::local;
    c.group_rank = 0;
    c.group_world_size = 1;
    c.use_agent_store = false;  // worker rank 0 hosts the store on MASTER_PORT
  } else {
    c.rdzv.backend = Backend::static_tcp;
    c.rdzv.node_rank = nodes.node_rank;
    c.rdzv.nnodes = n;
    c.group_rank = nodes.node_rank;
    c.group_world_size = n;
    c.use_agent_store = true;
  }
  fill_settings(raw, c, nodes, endpoint);
}

// With etcd, token_file holds an etcd user's NAME:PASSWORD, as etcdctl's
// --user takes them: the password stays out of argv and the environment.
void etcd_credentials(const RawOptions& raw, rdzv::RendezvousSettings& s) {
  if (s.token.empty()) return;
  const auto colon = s.token.find(':');
  if (colon == 0 || colon == std::string::npos || colon + 1 == s.token.size())
    throw UsageError(raw.at("rdzv_conf").shown() +
                     ": with etcd, token_file holds an etcd user's credentials as NAME:PASSWORD on one line");
  s.etcd.username = s.token.substr(0, colon);
  s.etcd.password = s.token.substr(colon + 1);
  s.token.clear();  // not the c10d store's secret
}

}  // namespace

std::string random_uuid4() { return boost::uuids::to_string(boost::uuids::random_generator()()); }

void check_rendezvous_supported(const RawOptions& raw) {
  const Nodes nodes = nodes_of(raw);
  const RawValue& nnodes = raw.at("nnodes");
  if (raw.flag("standalone")) {  // torchrun ignores the backend options then
    if (nodes.max_nodes != 1)
      throw UsageError("--standalone runs a single node; drop " + nnodes.shown());
    check_single_node_rank(raw, nodes.node_rank);
    return;
  }
  const RawValue& backend = raw.at("rdzv_backend");
  if (is_etcd(backend.text)) {
    etcd_endpoints(raw);
    return;
  }
  if (backend.text != "static" && backend.text != "c10d")
    throw UsageError(backend.shown() + ": unknown rendezvous backend (choose from static, c10d, etcd-v3)");
  if (backend.text == "c10d") {
    c10d_endpoint(raw);  // --node-rank is ignored, as torchrun does
    return;
  }

  if (nodes.min_nodes != nodes.max_nodes)
    throw UsageError(fmt::format("static rendezvous needs a fixed --nnodes=N, got {}",
                                 nnodes.origin == "--nnodes" ? nnodes.text : nnodes.shown()));
  if (nodes.max_nodes == 1) return check_single_node_rank(raw, nodes.node_rank);
  if (nodes.node_rank < 0 || nodes.node_rank >= nodes.max_nodes)
    throw UsageError(fmt::format("{}: must be in 0..{} with {} (node ranks run 0..NNODES-1)",
                                 raw.at("node_rank").shown(), nodes.max_nodes - 1, nnodes.shown()));
}

void apply_rdzv_conf_option(const RawValue& value, rendezvous::RendezvousConfig& config) {
  std::map<std::string, std::string> conf = parse_rdzv_conf(value);
  std::string is_host;
  try {
    is_host = rdzv::apply_rdzv_conf(conf, config.settings);
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    // Its messages name "--rdzv-conf key=value"; a PET_RDZV_CONF value is named by its variable.
    if (value.origin == "--rdzv-conf" && what.starts_with("--rdzv-conf ")) throw UsageError(what);
    throw UsageError(value.shown() + ": " + what);
  }
  if (!is_host.empty()) config.is_host = is_host == "true";
}

void choose_rendezvous(const RawOptions& raw, agent::Config& config, std::vector<std::string>& warnings,
                       std::vector<std::string>& notes) {
  check_rendezvous_supported(raw);
  const Nodes nodes = nodes_of(raw);
  if (raw.flag("standalone")) {
    standalone(raw, config, nodes);
    notes.push_back(fmt::format("Rendezvous info: --rdzv-backend=c10d --rdzv-endpoint=localhost:0 --rdzv-id={}",
                                config.run_id));
  } else if (single_node_default(raw, nodes))
    standalone(raw, config, nodes);
  else if (raw.at("rdzv_backend").text == "c10d")
    c10d(raw, config, nodes, warnings);
  else if (is_etcd(raw.at("rdzv_backend").text))
    etcd(raw, config, nodes, notes);
  else
    static_backend(raw, config, nodes);
  const bool on_etcd = config.rdzv.backend == Backend::etcd;
  for (const auto& [key, value] : parse_rdzv_conf(raw.at("rdzv_conf")))
    if (!on_etcd && (key == "protocol" || key == "cacert" || key == "cert" || key == "key" || key == "etcd_prefix"))
      throw UsageError(raw.at("rdzv_conf").shown() + ": " + key + " is read by the etcd backends only (--rdzv-backend=etcd-v3)");
  if (on_etcd) return etcd_credentials(raw, config.rdzv.settings);
  if (config.rdzv.settings.token.empty() || config.rdzv.backend == Backend::c10d) return;
  // The static backend's store is the workers' store too (MASTER_PORT), and
  // torch workers have no way to give a token: they would all be refused.
  // On one node too, where worker rank 0 hosts it: the token would protect
  // nothing, and the user asked for protection.
  if (!raw.flag("standalone"))
    throw UsageError(raw.at("rdzv_conf").shown() +
                     ": token_file needs --rdzv-backend=c10d; the static backend's store is also the "
                     "workers' store, and workers cannot give a token");
  warnings.push_back("--rdzv-conf token_file has no effect: a --standalone job has no rendezvous store");
}

}  // namespace cxxrun::launcher
