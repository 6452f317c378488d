// Round events: how one node tells every other that the current round is
// over (a failure, a node waiting to join, a dead member, or success). Each
// is one COMPARE_SET on the round's event key, so every agent that WAITs on
// that key is woken by the server at once, and all agree on which came first.
#include "rendezvous/c10d_rendezvous.h"

namespace cxxrun::rendezvous {

std::string C10dRendezvous::event_key() const { return round_key(round_, "event"); }

std::string C10dRendezvous::publish_event(const std::string& what) {
  return store_.compare_set(event_key(), "", what);
}

std::string C10dRendezvous::publish_failure(const std::string& record) {
  const std::string first = store_.compare_set(round_key(round_, "failure"), "", record);
  publish_event("abort");
  return first;
}

std::string C10dRendezvous::finish_round() {
  const int64_t finished = store_.add(round_key(round_, "finished"), 1);
  if (finished >= members_) return publish_event("done");
  return store_.check({event_key()}) ? store_.get(event_key()) : "";
}

std::string C10dRendezvous::failure_record() {
  const std::string k = round_key(round_, "failure");
  return store_.check({k}) ? store_.get(k) : "";
}

}  // namespace cxxrun::rendezvous
