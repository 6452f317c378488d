#include "rendezvous/beat_counters.h"

namespace cxxrun::rendezvous {

void BeatCounters::joined(std::string prefix, int slot) {
  prefix_ = std::move(prefix);
  slot_ = slot;
  seen_.clear();
  counted_ = 0;
}

void BeatCounters::beat(store::StoreClient& store, const std::string& forgotten) {
  // Once seen, it stays so: the counter counts up again from nothing.
  if (counted_ < 0) throw store::StoreError(forgotten);
  const int64_t counted = store.add(prefix_ + std::to_string(slot_), 1);
  if (counted <= counted_) {
    counted_ = -1;
    throw store::StoreError(forgotten);
  }
  counted_ = counted;
}

BeatCounters::Clock::duration BeatCounters::still_for(store::StoreClient& store, int slot, Clock::time_point now) {
  read(store, prefix_, slot, seen_, now);
  return now - seen_.at(slot).second;
}

bool BeatCounters::read(store::StoreClient& store, const std::string& prefix, int slot, Seen& seen,
                        Clock::time_point now) {
  const long long beats = store.add(prefix + std::to_string(slot), 0);
  auto [it, fresh] = seen.try_emplace(slot, beats, now);
  if (fresh || it->second.first == beats) return false;
  it->second = {beats, now};
  return true;
}

bool BeatCounters::all_still(store::StoreClient& store, const std::string& prefix, int members, Seen& seen,
                             Clock::duration limit) {
  const auto now = Clock::now();
  bool still = true;
  for (int i = 0; i < members; ++i) {
    if (read(store, prefix, i, seen, now)) return false;
    if (now - seen.at(i).second < limit) still = false;
  }
  return still;
}

}  // namespace cxxrun::rendezvous
