#include "rendezvous/lease_keeper.h"

#include "rendezvous/member_liveness.h"

namespace cxxrun::rendezvous {

void LeaseKeeper::beat() {
  if (!liveness_) return;
  try {
    liveness_->beat();
  } catch (const store::StoreError& e) {
    failed_(std::string("keep-alive while waiting for the other nodes failed: ") + e.what());
  }
  // A failed beat is not retried at once: the next is an interval away.
  last_ = Clock::now();
}

}  // namespace cxxrun::rendezvous
