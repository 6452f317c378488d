#include "agent/meeting.h"

#include <spdlog/spdlog.h>

#include <stdexcept>
#include <system_error>
#include <thread>

#include "rendezvous/c10d_rendezvous.h"
#include "store/client.h"
#include "store/endpoint.h"
#include "store/server.h"

namespace cxxrun::agent {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::milliseconds;
using rendezvous::RendezvousError;

// The deadline of a non-host node's calls while it says it is done.
constexpr milliseconds kCloseCallTimeout{5000};

milliseconds remaining(Clock::time_point deadline) {
  return std::max(milliseconds(1), duration_cast<milliseconds>(deadline - Clock::now()));
}

std::string where(const RendezvousConfig& r) { return store::format_endpoint({r.host, r.port}); }

}  // namespace

Meeting::Meeting(const Config& config) : config_(config) {}
Meeting::~Meeting() = default;

// The c10d store lives in the agent whose host matches the endpoint (or
// wherever --rdzv-conf is_host says); static: node 0. A second agent on the
// same host finds the port taken and joins as a client, as torchrun does,
// unless is_host was given explicitly.
void Meeting::host_store_if_needed() {
  const RendezvousConfig& r = config_.rdzv;
  bool host = r.backend == Backend::static_tcp ? r.node_rank == 0
                                                : r.is_host.value_or(store::is_local_host(r.host));
  if (!host) return;
  try {
    server_ = std::make_unique<store::BackgroundStoreServer>(store::StoreServerOptions{"", r.port});
    spdlog::info("hosting the rendezvous store on port {}", server_->port());
  } catch (const std::exception& e) {
    if (r.backend == Backend::c10d && !r.is_host)
      spdlog::info("port {} is taken on this host ({}); joining its store as a client", r.port, e.what());
    else
      throw RendezvousError("cannot host the rendezvous store on port " + std::to_string(r.port) + ": " + e.what());
  }
}

// Retries until the backend's deadline, saying every few seconds what it
// waits for: the server may simply not be up yet.
void Meeting::connect() {
  const RendezvousConfig& r = config_.rdzv;
  const auto& s = r.settings;
  const milliseconds limit = r.backend == Backend::static_tcp ? s.static_timeout : s.join_timeout;
  const auto deadline = Clock::now() + limit;
  store::StoreClient::Options options = store_options();
  for (;;) {
    options.timeout = std::min(remaining(deadline), s.progress_interval);
    try {
      client_ = store::StoreClient::connect(options);
      break;
    } catch (const store::StoreError& e) {
      if (Clock::now() >= deadline)
        throw RendezvousError("cannot reach the rendezvous store of job=" + s.run_id + " at " + where(r) +
                              " after " + std::to_string(limit.count() / 1000) + " s: " + e.what());
      spdlog::info("waiting for rendezvous job={} at {}: store not reachable yet", s.run_id, where(r));
    }
  }
  // Later calls get the per-operation deadline.
  client_->set_timeout(s.read_timeout);
}

// torch's workers with TORCHELASTIC_USE_AGENT_STORE=True connect to
// MASTER_ADDR:MASTER_PORT as clients: torch 1.13 under a
// "/worker/attempt_<n>" prefix, torch 2.x under none (it counts on a new
// store for every attempt).
int Meeting::serve_worker_store(const std::string& host, int port) {
  worker_store_.reset();
  worker_store_ = std::make_unique<store::BackgroundStoreServer>(store::StoreServerOptions{host, port});
  worker_store_host_ = host;
  spdlog::info("serving the workers' store on {}", worker_store_->address());
  return worker_store_->port();
}

void Meeting::join(Config& config) {
  const RendezvousConfig& r = config_.rdzv;
  if (r.backend == Backend::local) {
    if (!config.use_agent_store) return;
    // A loopback MASTER_ADDR (--standalone) stays on loopback.
    const bool loopback = config.master_addr.rfind("127.", 0) == 0 || config.master_addr == "::1" ||
                          config.master_addr == "localhost";
    try {
      config.master_port = serve_worker_store(loopback ? config.master_addr : "", config.master_port);
    } catch (const std::exception& e) {
      throw RendezvousError(std::string("cannot serve the workers' store: ") + e.what());
    }
    return;
  }
  if (!client_) {
    host_store_if_needed();
    connect();
  }
  if (r.backend == Backend::static_tcp) return join_static(config);
  if (!rdzv_) {
    const std::string local = r.settings.local_addr.empty() ? client_->local_address() : r.settings.local_addr;
    // Group rank 0 says where the workers' store is: one this agent serves
    // on a port the OS picks (no race), or a free port for worker rank 0.
    auto pick = [this, local, share = config.use_agent_store] {
      return share ? serve_worker_store("", 0) : store::pick_free_port(local);
    };
    rdzv_ = std::make_unique<rendezvous::C10dRendezvous>(*client_, r.settings, pick,
        [](const std::string& line) { spdlog::info("{}", line); });
    // Beats get a connection with a deadline of about one interval, so a
    // lost store shows within keep_alive_max_attempt beats.
    auto options = store_options();
    options.timeout = std::max(milliseconds(500), r.settings.keep_alive_interval);
    beat_client_ = store::StoreClient::connect(options);
    rdzv_->use_for_keep_alives(*beat_client_);
  }
  apply(config, rdzv_->next_rendezvous());
}

void Meeting::renew_worker_store() {
  if (!worker_store_) return;
  // The same port, so MASTER_PORT holds; the old server is closed first and
  // the acceptor reuses the address.
  try {
    serve_worker_store(worker_store_host_, worker_store_->port());
  } catch (const std::exception& e) {
    throw RendezvousError(std::string("cannot serve the workers' store again: ") + e.what());
  }
}

void Meeting::rejoin(Config& config, int expected) {
  rdzv_->start_next_round();
  apply(config, rdzv_->next_rendezvous(expected));
}

void Meeting::apply(Config& config, const rendezvous::Assignment& a) {
  members_ = a.group_world_size;
  config.group_rank = a.group_rank;
  config.group_world_size = a.group_world_size;
  config.base_rank = a.base_rank;
  config.world_size = a.world_size;
  config.master_addr = a.master_addr;
  config.master_port = a.master_port;
}

// torchrun's static backend: node ranks are given; each node publishes its
// worker count so ranks are cumulative even when nodes differ.
void Meeting::join_static(Config& config) {
  const RendezvousConfig& r = config_.rdzv;
  const std::string prefix = "cxxrun/static/" + r.settings.run_id + "/node/";
  client_->set(prefix + std::to_string(r.node_rank), std::to_string(config.nproc_per_node));
  const auto deadline = Clock::now() + r.settings.static_timeout;
  std::vector<std::string> keys;
  for (int i = 0; i < r.nnodes; ++i) keys.push_back(prefix + std::to_string(i));
  for (;;) {
    try {
      client_->wait(keys, std::min(remaining(deadline), r.settings.progress_interval));
      break;
    } catch (const store::StoreTimeout&) {
      int joined = 0;
      for (const auto& k : keys) joined += client_->check({k});
      if (Clock::now() >= deadline)
        throw RendezvousError("timed out waiting for static rendezvous job=" + r.settings.run_id + " at " +
                              where(r) + ": " + std::to_string(joined) + "/" + std::to_string(r.nnodes) +
                              " nodes joined");
      spdlog::info("waiting for rendezvous job={} at {}: {}/{} nodes", r.settings.run_id, where(r), joined,
                   r.nnodes);
    }
  }
  int base = 0, world = 0;
  for (int i = 0; i < r.nnodes; ++i) {
    int nproc = std::stoi(client_->get(keys[i]));
    if (i < r.node_rank) base += nproc;
    world += nproc;
  }
  members_ = r.nnodes;
  config.base_rank = base;
  config.world_size = world;
}

store::StoreClient::Options Meeting::store_options() const {
  store::StoreClient::Options options;
  options.host = config_.rdzv.host;
  options.port = config_.rdzv.port;
  options.timeout = config_.rdzv.settings.read_timeout;
  return options;
}

std::unique_ptr<EventWatcher> Meeting::make_watcher(EventWatcher::Deliver deliver) {
  return std::make_unique<EventWatcher>(store::StoreClient::connect(store_options()), std::move(deliver));
}

milliseconds Meeting::keep_alive_interval() const {
  return config_.rdzv.backend == Backend::c10d ? config_.rdzv.settings.keep_alive_interval : milliseconds(0);
}

Meeting::Beat Meeting::keep_alive() {
  if (!rdzv_) return Beat::ok;
  const auto& s = config_.rdzv.settings;
  try {
    if (store_delay_.count() > 0) std::this_thread::sleep_for(store_delay_);
    if (store_dropped_) throw store::StoreError("connection dropped by fault injection");
    rdzv_->keep_alive();
    if (keep_alive_failures_ > 0) spdlog::info("keep-alives reach the rendezvous store again");
    keep_alive_failures_ = 0;
    return Beat::ok;
  } catch (const std::exception& e) {
    if (keep_alive_failures_++ == 0) spdlog::warn("keep-alive to the rendezvous store failed: {}", e.what());
  }
  if (keep_alive_failures_ < s.keep_alive_max_attempt) return Beat::failing;
  spdlog::error("lost the rendezvous store of job={} at {}: no keep-alive got through for {} ms", s.run_id,
                where(config_.rdzv), (s.keep_alive_interval * s.keep_alive_max_attempt).count());
  return Beat::lost;
}

void Meeting::close(bool succeeded) {
  // A lost store cannot be told anything; every call would wait out its
  // deadline.
  if (!client_ || keep_alive_failures_ >= config_.rdzv.settings.keep_alive_max_attempt) return;
  const auto& s = config_.rdzv.settings;
  const std::string done = "cxxrun/exit/" + s.run_id;
  // A node that is not the store host may find it gone (it stops waiting
  // after close_timeout); that must not hold this one for a read_timeout.
  if (!server_) client_->set_timeout(std::min(s.read_timeout, kCloseCallTimeout));
  try {
    if (rdzv_) rdzv_->close();
    // One atomic ADD per node, and a key only from the last one: the host
    // may close the store the moment the count is full, so no node may have
    // a request left to send after its ADD, except the one the host waits for.
    int64_t finished = client_->add(done, 1);
    if (finished == members_) client_->set(done + "/all", "1");
    if (!server_ || finished >= members_) return;
    const milliseconds limit = succeeded ? s.close_timeout : std::min(s.close_timeout, milliseconds(5000));
    spdlog::info("waiting up to {} ms for the other {} nodes to finish before closing the store", limit.count(),
                 members_ - finished);
    const auto deadline = Clock::now() + limit;
    while (finished < members_ && Clock::now() < deadline) {
      // The counter key exists already, so wait on the key the last node
      // creates instead of polling the count.
      try {
        client_->wait({done + "/all"}, std::min(remaining(deadline), s.progress_interval));
      } catch (const store::StoreTimeout&) {
      }
      finished = client_->add(done, 0);
    }
  } catch (const std::exception& e) {
    spdlog::warn("could not close rendezvous '{}': {}", s.run_id, e.what());
  }
}

}  // namespace cxxrun::agent
