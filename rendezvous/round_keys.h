// Where the c10d rendezvous keeps one job's keys in its store (the layout
// rendezvous/c10d_rendezvous.h lists), for the objects that share them.
#pragma once

#include <string>

namespace cxxrun::rendezvous {

struct RoundKeys {
  std::string job;  // "cxxrun/rdzv/<run_id>/"

  explicit RoundKeys(const std::string& run_id) : job("cxxrun/rdzv/" + run_id + "/") {}
  std::string key(const std::string& suffix) const { return job + suffix; }
  std::string round(int round, const std::string& suffix) const {
    return key("r" + std::to_string(round) + "/" + suffix);
  }
  // The milestones, which every member waits for (StoreClient::expect_waits_under).
  std::string milestone_prefix() const { return key("m/"); }
  std::string milestone(int round, const std::string& suffix) const {
    return milestone_prefix() + "r" + std::to_string(round) + "/" + suffix;
  }
  // Apart from them, every round's event.
  std::string event_prefix() const { return key("event/"); }
  std::string event(int round) const { return event_prefix() + "r" + std::to_string(round); }
};

}  // namespace cxxrun::rendezvous
