#include "rendezvous/etcd_job_store.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "etcd/client.h"
#include "etcd/errors.h"

namespace cxxrun::rendezvous {

EtcdJobStore::EtcdJobStore(const RendezvousSettings& settings)
    : settings_(settings),
      store_(settings.etcd, settings.read_timeout),
      liveness_(settings, store_) {
  reach();
  spdlog::info("rendezvous through etcd at {} (prefix {})", settings.endpoint, settings.etcd.prefix);
}

// One read, tried until join_timeout as the c10d store's connect is: etcd
// may be starting with the job. Each failed try is one line, a
// progress_interval apart (a dead endpoint was silent for read_timeout,
// retrying twice a second at DEBUG). What waiting cannot mend, a wrong
// certificate or password, is one line at once.
void EtcdJobStore::reach() {
  using Clock = std::chrono::steady_clock;
  using std::chrono::milliseconds;
  const auto deadline = Clock::now() + settings_.join_timeout;
  // A try cut to less than this by the deadline says nothing new.
  constexpr milliseconds kShortestTry{100};
  const std::string key = store_.etcd_key("cxxrun/rdzv/" + settings_.run_id + "/config");
  for (int attempt = 1;; ++attempt) {
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    const auto slice = std::max(milliseconds(1), std::min({left, settings_.progress_interval, settings_.read_timeout}));
    try {
      store_.client().range(key, slice);
      if (attempt > 1) spdlog::info("reached the etcd cluster at {} after {} tries", settings_.endpoint, attempt);
      return;
    } catch (const etcd::EtcdTlsError& e) {
      throw RendezvousError(std::string("cannot reach the etcd cluster: ") + e.what());
    } catch (const etcd::EtcdUnavailable& e) {
      retry_or_give_up(e.what(), "not reachable", attempt, deadline - Clock::now() < kShortestTry);
    } catch (const etcd::EtcdTimeout& e) {
      retry_or_give_up(e.what(), "not answering", attempt, deadline - Clock::now() < kShortestTry);
    } catch (const etcd::EtcdError& e) {
      throw RendezvousError(std::string("cannot reach the etcd cluster at ") + settings_.endpoint + ": " + e.what());
    }
  }
}

void EtcdJobStore::retry_or_give_up(const std::string& why, const char* state, int attempt, bool out_of_time) const {
  if (out_of_time) give_up(why);
  spdlog::warn("etcd at {} {} yet (try {}): {}", settings_.endpoint, state, attempt, why);
}

void EtcdJobStore::give_up(const std::string& why) const {
  throw RendezvousError("cannot reach the etcd cluster at " + settings_.endpoint + " within join_timeout=" +
                        fmt::format("{:g} s", settings_.join_timeout.count() / 1000.0) + ": " + why);
}

std::unique_ptr<store::StoreClient> EtcdJobStore::connect_another(std::chrono::milliseconds timeout) const {
  return std::make_unique<EtcdStore>(settings_.etcd, timeout);
}

void EtcdJobStore::leave(bool succeeded, int members, const std::function<void()>& first) {
  // Before anything: a DELETE of another leaving member's key is no news.
  liveness_.stop_watching(true);
  try {
    if (first) first();
    // The job's keys outlive its agents in etcd: the last member to leave
    // removes them, so the run id can be used again. (Not a spare: it
    // belongs to no round's count.)
    const std::string job = "cxxrun/rdzv/" + settings_.run_id + "/";
    if (members > 0 && store_.add(job + "left", 1) >= members) {
      store_.client().delete_prefix(store_.etcd_key(job));
      spdlog::info("the job's rendezvous keys are removed from etcd");
    }
  } catch (const std::exception& e) {
    spdlog::warn("cannot tell the other nodes this node left: {}", e.what());
  }
  // A job that ended well needs no one to see this node go: its alive key
  // goes with the job's keys, deleted by the last member to leave, or when
  // the lease lapses a TTL later. Revoked, each lease's DELETE was pushed to
  // every member not yet leaving: measured, a job of N nodes sent about
  // N^2/2 events at its end (12,600 for 200 nodes; etcd's CPU for 1,000 was
  // a third in its watch streams).
  if (!succeeded) liveness_.release();
}

}  // namespace cxxrun::rendezvous
