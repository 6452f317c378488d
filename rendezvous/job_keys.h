// Where the c10d rendezvous keeps a job's keys in its store: every key under
// "cxxrun/rdzv/<run_id>/", a round's under "r<k>/", and the round's
// milestones, which every member waits for, under "m/r<k>/" and "m/event/"
// (the layout, key
// by key, is in rendezvous/c10d_rendezvous.h). One spelling for the
// algorithm and for the pieces that keep keys of a round (round_outcome.h),
// so that they name the same keys.
#pragma once

#include <string>
#include <utility>

namespace cxxrun::rendezvous {

class JobKeys {
 public:
  explicit JobKeys(std::string run_id) : run_id_(std::move(run_id)) {}

  // A key of the job: "cxxrun/rdzv/<run_id>/<suffix>".
  std::string job(const std::string& suffix) const { return "cxxrun/rdzv/" + run_id_ + "/" + suffix; }
  // A key of `round`: "…/r<round>/<suffix>".
  std::string round(int round, const std::string& suffix) const {
    return job("r" + std::to_string(round) + "/" + suffix);
  }
  // A milestone of `round`: "…/m/r<round>/<suffix>".
  std::string milestone(int round, const std::string& suffix) const {
    return job("m/r" + std::to_string(round) + "/" + suffix);
  }
  // Where every round's milestones live (StoreClient::expect_waits_under).
  std::string milestone_prefix() const { return job("m/"); }
  // Every round's event, a milestone apart from the round's others
  // ("…/m/event/r<round>"): a connection that waits for events alone (the
  // round watcher's) is told event_prefix(), and its watch brings nothing else.
  std::string event_prefix() const { return job("m/event/"); }
  std::string event(int round) const { return event_prefix() + "r" + std::to_string(round); }

 private:
  std::string run_id_;
};

}  // namespace cxxrun::rendezvous
