#include "rendezvous/job_store.h"

#include <spdlog/spdlog.h>

#include "rendezvous/worker_store.h"
#include "net/endpoint.h"
#include "store/server.h"

namespace cxxrun::rendezvous {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

// The deadline of a non-host node's calls while it leaves.
constexpr milliseconds kLeaveCallTimeout{5000};
// How long a candidate host tries to connect before trying to host again.
constexpr milliseconds kRehostInterval{500};

milliseconds time_left(Clock::time_point deadline) {
  return std::max(milliseconds(1), duration_cast<milliseconds>(deadline - Clock::now()));
}

std::string where(const RendezvousConfig& r) { return net::format_endpoint({r.host, r.port}); }

}  // namespace

JobStore::JobStore(const RendezvousConfig& config) : config_(config) { connect(host_if_needed(true)); }

JobStore::~JobStore() = default;

// A second agent on the host finds the port taken and joins as a client, as
// torchrun does, unless is_host was given explicitly. Returns whether this
// node may still become the host (it is a candidate, not told to).
bool JobStore::host_if_needed(bool first) {
  const RendezvousConfig& r = config_;
  const bool host =
      r.backend == Backend::static_tcp ? r.node_rank == 0 : r.is_host.value_or(net::is_local_host(r.host));
  if (!host) return false;
  try {
    // Where the other nodes reach it, and nowhere else (loopback for a
    // loopback endpoint).
    store::StoreServerOptions options;
    options.host = bind_host_for(r.host);
    options.port = r.port;
    options.token = r.settings.token;
    server_ = std::make_unique<store::BackgroundStoreServer>(options);
    spdlog::info("hosting the rendezvous store on port {}", server_->port());
    // The static backend's store is the workers' too, and they have no token
    // to give (the launcher refuses token_file there): no advice to offer.
    if (r.backend == Backend::c10d && r.settings.token.empty() && !server_->loopback_only())
      spdlog::warn("no token on the rendezvous store, which listens on {}: anyone who can reach it can "
                   "join or disturb the job (--rdzv-conf token_file=PATH sets a shared secret)",
                   server_->address());
    return false;
  } catch (const std::exception& e) {
    if (r.backend != Backend::c10d || r.is_host)
      throw RendezvousError("cannot host the rendezvous store on port " + std::to_string(r.port) + ": " + e.what());
    if (first) spdlog::info("port {} is taken on this host ({}); joining its store as a client", r.port, e.what());
    return true;
  }
}

// Retries until the backend's deadline, saying every few seconds what it
// waits for: the server may simply not be up yet. A candidate host that found
// the port taken tries to host again between attempts: two agents binding at
// the same moment can both lose (neither may listen while the other is
// bound), and then no one else will.
void JobStore::connect(bool may_host) {
  const RendezvousConfig& r = config_;
  const auto& s = r.settings;
  const milliseconds limit = r.backend == Backend::static_tcp ? s.static_timeout : s.join_timeout;
  const auto deadline = Clock::now() + limit;
  auto next_progress = Clock::now() + s.progress_interval;
  store::StoreClient::Options o = options();
  for (;;) {
    o.timeout = std::min({time_left(deadline), s.progress_interval, may_host ? kRehostInterval : s.progress_interval});
    try {
      client_ = store::StoreClient::connect(o);
      break;
    } catch (const store::StoreRefused& e) {
      // The store is up and refused us (a wrong token, or none where it
      // wants one): waiting cannot change its verdict.
      throw RendezvousError("cannot join the rendezvous of job=" + s.run_id + " at " + where(r) + ": " +
                            e.what() + " (--rdzv-conf token_file)");
    } catch (const store::StoreError& e) {
      if (Clock::now() >= deadline)
        throw RendezvousError("cannot reach the rendezvous store of job=" + s.run_id + " at " + where(r) +
                              " after " + std::to_string(limit.count() / 1000) + " s: " + e.what());
      if (may_host) may_host = host_if_needed(false);
      if (Clock::now() >= next_progress) {
        spdlog::info("waiting for rendezvous job={} at {}: store not reachable yet", s.run_id, where(r));
        next_progress = Clock::now() + s.progress_interval;
      }
    }
  }
  // Later calls get the per-operation deadline.
  client_->set_timeout(s.read_timeout);
}

store::StoreClient::Options JobStore::options() const {
  store::StoreClient::Options o;
  o.host = config_.host;
  o.port = config_.port;
  o.timeout = config_.settings.read_timeout;
  o.token = config_.settings.token;
  o.abandoned = abandoned_;
  return o;
}

std::unique_ptr<store::StoreClient> JobStore::connect_another(milliseconds timeout) const {
  store::StoreClient::Options o = options();
  o.timeout = timeout;
  return store::StoreClient::connect(o);
}

void JobStore::leave(bool succeeded, int members, const std::function<void()>& first) {
  const auto& s = config_.settings;
  const std::string done = "cxxrun/exit/" + s.run_id;
  // A node that is not the host may find the store gone (the host stops
  // waiting after close_timeout); that must not hold it for a read_timeout.
  if (!server_) client_->set_timeout(std::min(s.read_timeout, kLeaveCallTimeout));
  try {
    if (first) first();
    // One atomic ADD per node, and a key only from the last one: the host
    // may close the store the moment the count is full, so no node may have
    // a request left to send after its ADD, except the one the host waits for.
    int64_t finished = client_->add(done, 1);
    if (finished == members) client_->set(done + "/all", "1");
    if (!server_ || finished >= members) return;
    const milliseconds limit = succeeded ? s.close_timeout : std::min(s.close_timeout, milliseconds(5000));
    spdlog::info("waiting up to {} ms for the other {} nodes to finish before closing the store", limit.count(),
                 members - finished);
    const auto deadline = Clock::now() + limit;
    while (finished < members && Clock::now() < deadline) {
      // The counter key exists already, so wait on the key the last node
      // creates instead of polling the count.
      try {
        client_->wait({done + "/all"}, std::min(time_left(deadline), s.progress_interval));
      } catch (const store::StoreTimeout&) {
      }
      finished = client_->add(done, 0);
    }
  } catch (const std::exception& e) {
    spdlog::warn("could not close rendezvous '{}': {}", s.run_id, e.what());
  }
}

}  // namespace cxxrun::rendezvous
