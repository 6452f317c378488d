// Round events: how one node tells every other that the current round is
// over (a failure, a node waiting to join, a dead member, or success). Each
// is one COMPARE_SET on the round's event key, so every agent that WAITs on
// that key is woken by the server at once, and all agree on which came first.
#include "rendezvous/c10d_rendezvous.h"

#include <sstream>
#include <stdexcept>

namespace cxxrun::rendezvous {

std::string C10dRendezvous::event_key() const { return round_key(round_, "event"); }

std::string C10dRendezvous::publish_event(const std::string& what) {
  return store_.compare_set(event_key(), "", what);
}

void C10dRendezvous::publish_failure(const std::string& record) {
  if (record.find('\n') != std::string::npos)
    throw std::invalid_argument("a failure record must be one line");
  store_.append(round_key(round_, "failures"), record + "\n");
  publish_event("abort");
}

std::string C10dRendezvous::finish_round() {
  const int64_t finished = store_.add(round_key(round_, "finished"), 1);
  if (finished >= members_) return publish_event("done");
  return store_.check({event_key()}) ? store_.get(event_key()) : "";
}

void C10dRendezvous::wait_all_stopped(std::chrono::milliseconds timeout) {
  const std::string all = round_key(round_, "all_stopped");
  if (store_.add(round_key(round_, "stopped"), 1) >= members_) return store_.set(all, "1");
  try {
    store_.wait({all}, timeout);
  } catch (const store::StoreTimeout&) {
    // A member that is dead or still stopping: print what is known.
  }
}

std::vector<std::string> C10dRendezvous::failure_records() {
  const std::string k = round_key(round_, "failures");
  std::vector<std::string> records;
  if (!store_.check({k})) return records;
  std::istringstream lines(store_.get(k));
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) records.push_back(line);
  return records;
}

}  // namespace cxxrun::rendezvous
