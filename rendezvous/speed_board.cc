#include "rendezvous/speed_board.h"

namespace cxxrun::rendezvous {

SpeedBoard::SpeedBoard(Connect connect, std::string prefix, int group_rank, int members)
    : connect_(std::move(connect)), prefix_(std::move(prefix)), me_(group_rank), members_(members) {}

SpeedBoard::~SpeedBoard() = default;

std::string SpeedBoard::speed_key(int group_rank) const { return prefix_ + "speed/" + std::to_string(group_rank); }
std::string SpeedBoard::said_key(int group_rank) const { return prefix_ + "said/" + std::to_string(group_rank); }

template <typename Call>
auto SpeedBoard::on_store(Call call) {
  try {
    if (!store_) store_ = connect_();
    return call(*store_);
  } catch (...) {
    // The next window starts on a fresh connection, as the job board's does.
    store_.reset();
    throw;
  }
}

std::string SpeedBoard::exchange(const std::string& summary) {
  return on_store([&](store::StoreClient& store) {
    store.set(speed_key(me_), summary);
    return store.get_if_set(said_key(me_)).value_or("");
  });
}

std::vector<std::string> SpeedBoard::all() {
  std::vector<std::string> keys;
  keys.reserve(members_);
  for (int r = 0; r < members_; ++r) keys.push_back(speed_key(r));
  return on_store([&](store::StoreClient& store) {
    if (!complete_ && !store.check(keys)) {
      // Which are missing would cost a request each: every other member's is
      // made empty, and a summary already there is lost for one window.
      std::vector<std::string> others;
      for (int r = 0; r < members_; ++r)
        if (r != me_) others.push_back(keys[r]);
      store.multi_set(others, std::vector<std::string>(others.size()));
    }
    complete_ = true;
    return store.multi_get(keys);
  });
}

void SpeedBoard::tell(int group_rank, const std::string& verdict) {
  on_store([&](store::StoreClient& store) { store.set(said_key(group_rank), verdict); });
}

}  // namespace cxxrun::rendezvous
