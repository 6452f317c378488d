#include "rendezvous/round_outcome.h"

#include <stdexcept>

#include "rendezvous/round_records.h"
#include "store/client.h"

namespace cxxrun::rendezvous {

RoundEvent RoundOutcome::publish_event(RoundEvent what) {
  const RoundEvent won = parse_round_event(store_.compare_set(event_key(), "", std::string(to_string(what))));
  remember_event(round_, won);
  return won;
}

RoundEvent RoundOutcome::current_event() {
  const long long known = known_event_.load();
  if (known >= 0 && (known >> 8) == round_) return static_cast<RoundEvent>(known & 0xff);
  const auto event = store_.get_if_set(event_key());
  const RoundEvent now = event ? parse_round_event(*event) : RoundEvent::none;
  remember_event(round_, now);
  return now;
}

void RoundOutcome::learned_event(int round, RoundEvent what) { remember_event(round, what); }

void RoundOutcome::remember_event(int round, RoundEvent what) {
  if (round < 0 || what == RoundEvent::none) return;
  known_event_.store((static_cast<long long>(round) << 8) | static_cast<long long>(what));
}

void RoundOutcome::publish_failure(const std::string& record) {
  if (record.find('\n') != std::string::npos)
    throw std::invalid_argument("a failure record must be one line");
  try {
    store_.append(keys_.round(round_, "failures"), record + "\n");
  } catch (const store::StoreError&) {
    // The other nodes must stop whether or not the record got in.
    publish_event(RoundEvent::abort);
    throw;
  }
  publish_event(RoundEvent::abort);
}

std::vector<std::string> RoundOutcome::failure_records() {
  return parse_lines(store_.get_if_set(keys_.round(round_, "failures")).value_or(""));
}

RoundEvent RoundOutcome::finish_round() {
  const int64_t finished = store_.add(keys_.round(round_, "finished"), 1);
  if (finished >= members_) return publish_event(RoundEvent::done);
  return current_event();
}

void RoundOutcome::wait_all_stopped(std::chrono::milliseconds timeout) {
  const std::string all = keys_.milestone(round_, "all_stopped");
  // The verdict and then the summary both wait: this node counts once.
  if (counted_stopped_ != round_) {
    counted_stopped_ = round_;
    if (store_.add(keys_.round(round_, "stopped"), 1) >= members_) return store_.set(all, "1");
  }
  try {
    store_.wait({all}, timeout);
  } catch (const store::StoreTimeout&) {
    // A member that is dead or still stopping: print what is known.
  }
}

RoundEvent RoundOutcome::publish_dead(int count) {
  store_.compare_set(keys_.round(round_, "dead"), "", std::to_string(count));
  return publish_event(RoundEvent::dead);
}

int RoundOutcome::dead_count() {
  const auto dead = store_.get_if_set(keys_.round(round_, "dead"));
  return dead ? to_int(*dead, "dead count") : 0;
}

void RoundOutcome::publish_attempt(const std::string& record) {
  if (record.find('\n') != std::string::npos) throw std::invalid_argument("an attempt record must be one line");
  store_.append(keys_.round(round_, "attempts"), record + "\n");
}

std::vector<std::string> RoundOutcome::attempt_records() {
  return parse_lines(store_.get_if_set(keys_.round(round_, "attempts")).value_or(""));
}

std::string RoundOutcome::settle_verdict(const std::function<std::string(const std::string& last)>& propose) {
  const std::string verdict = keys_.round(round_, "verdict");
  if (auto settled = store_.get_if_set(verdict)) return *settled;
  const std::string proposal = propose(store_.get_if_set(keys_.key("history")).value_or(""));
  if (proposal.empty() || proposal.find('\n') != std::string::npos)
    throw std::invalid_argument("a verdict must be one non-empty line");
  const std::string settled = store_.compare_set(verdict, "", proposal);
  // Every member writes the same: a node that joins a later round starts
  // from it, whichever member's write comes last.
  store_.set(keys_.key("history"), settled);
  return settled;
}

}  // namespace cxxrun::rendezvous
