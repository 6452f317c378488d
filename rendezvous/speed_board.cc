#include "rendezvous/speed_board.h"

namespace cxxrun::rendezvous {

SpeedBoard::SpeedBoard(store::StoreClient& store, std::string prefix, int group_rank, int members)
    : store_(store), prefix_(std::move(prefix)), me_(group_rank), members_(members) {}

std::string SpeedBoard::speed_key(int group_rank) const { return prefix_ + "speed/" + std::to_string(group_rank); }
std::string SpeedBoard::said_key(int group_rank) const { return prefix_ + "said/" + std::to_string(group_rank); }

std::string SpeedBoard::exchange(const std::string& summary) {
  store_.set(speed_key(me_), summary);
  return store_.get_if_set(said_key(me_)).value_or("");
}

std::vector<std::string> SpeedBoard::all() {
  std::vector<std::string> keys;
  keys.reserve(members_);
  for (int r = 0; r < members_; ++r) keys.push_back(speed_key(r));
  if (!complete_ && !store_.check(keys)) {
    // Which are missing would cost a request each: every other member's is
    // made empty, and a summary already there is lost for one window.
    std::vector<std::string> others;
    for (int r = 0; r < members_; ++r)
      if (r != me_) others.push_back(keys[r]);
    store_.multi_set(others, std::vector<std::string>(others.size()));
  }
  complete_ = true;
  return store_.multi_get(keys);
}

void SpeedBoard::tell(int group_rank, const std::string& verdict) { store_.set(said_key(group_rank), verdict); }

}  // namespace cxxrun::rendezvous
