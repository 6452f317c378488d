// Gloo's rendezvous::Store over our TCPStore client, for connectFullMesh.
// Internal to cxxrun_worker; includes only Gloo's small store header.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "store/client.h"

namespace cxxrun::worker {

// Gloo reads peers' keys with get() before any wait() (it counts same-host
// peers that way), so get() must block until the key exists, as c10d's does.
// The base class's wait(keys, timeout) ignores its timeout; this one honours
// it. Every call ends by `deadline`, shared by the whole bootstrap so N
// sequential gets cannot add up to N timeouts; past it a call throws
// store::StoreTimeout.
class GlooStore : public gloo::rendezvous::Store {
 public:
  using Clock = std::chrono::steady_clock;
  GlooStore(store::StoreClient& client, Clock::time_point deadline);

  void set(const std::string& key, const std::vector<char>& data) override;
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  std::chrono::milliseconds remaining(std::chrono::milliseconds cap) const;

  store::StoreClient& client_;
  Clock::time_point deadline_;
};

}  // namespace cxxrun::worker
