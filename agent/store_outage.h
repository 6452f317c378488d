// What a silent rendezvous store means for this node, and what it says
// about it (agent/keep_alive.h notices the silence). A store that only one
// agent hosts is lost: the job ends. A replicated one (etcd without quorum)
// comes back: healthy workers need nothing from it, so they go on, and a
// node whose workers succeeded waits for the others' results at most
// read_timeout. One line when the outage begins and one when it ends;
// /healthz shows it meanwhile.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include <spdlog/logger.h>

#include "agent/config.h"

namespace cxxrun::agent {

class Reporter;

class StoreOutage {
 public:
  // `log` is the supervisor's logger, which it renames each round.
  StoreOutage(const Config& config, bool replicated, Reporter& reporter, const std::shared_ptr<spdlog::logger>& log);

  enum class Then { nothing, stop_workers, end_job };
  // No keep-alive got through for `silent`, while the workers run
  // (`waited` nullopt) or after they succeeded, `waited` in the barrier.
  Then silent(std::chrono::milliseconds silent, std::optional<std::chrono::steady_clock::duration> waited);
  // A call went through again.
  void regained();

 private:
  const Config& c_;
  const bool replicated_;
  Reporter& reporter_;
  const std::shared_ptr<spdlog::logger>& log_;
  bool outage_ = false;
};

}  // namespace cxxrun::agent
