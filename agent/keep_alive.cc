#include "agent/keep_alive.h"

#include <algorithm>

#include "agent/rendezvous_link.h"

namespace cxxrun::agent {

using rendezvous::Rendezvous;
using std::chrono::duration_cast;
using std::chrono::milliseconds;

namespace {

// The longest tick: how late past the bound a lost store may be declared.
constexpr milliseconds kMaxTick{250};

}  // namespace

KeepAlive::KeepAlive(boost::asio::io_context& io, RendezvousLink& link, milliseconds interval, int max_attempt,
                     Hooks hooks)
    : link_(link), interval_(interval), limit_(interval * max_attempt), hooks_(std::move(hooks)), timer_(io) {
  if (interval_.count() > 0) schedule();
}

void KeepAlive::cancel() {
  done_ = true;
  timer_.cancel();
}

void KeepAlive::schedule() {
  const milliseconds period = std::min(kMaxTick, interval_ / 4);
  tick_due_ = Clock::now() + period;
  timer_.expires_after(period);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || done_) return;
    tick();
    if (!done_) schedule();
  });
}

void KeepAlive::tick() {
  const auto now = Clock::now();
  // Held up for a whole interval or more (no beat could go out on time):
  // that time does not count as the store's silence. A tick a little late
  // on a busy host does, so jitter never stretches the verdict.
  const auto held = now - tick_due_;
  if (held >= interval_) last_ok_ = std::min(now, last_ok_ + held);
  if (hooks_.paused()) {
    // A re-formed job starts its beats afresh: the rendezvous itself proved
    // the store alive.
    last_ok_ = now;
    lost_ = false;
    return;
  }
  if (now - last_ok_ >= limit_) {
    lost_ = true;
    hooks_.lost(duration_cast<milliseconds>(now - last_ok_));
  }
  if (in_flight_ || done_) return;
  const bool judging = hooks_.judging();
  const bool beat = now - last_beat_ >= interval_;
  const bool check = judging && now - last_check_ >= interval_ / 4;
  if (!beat && !check) return;
  in_flight_ = true;
  if (beat) last_beat_ = now;
  if (check) last_check_ = now;
  link_.call([this, beat, check](Rendezvous& r) -> RendezvousLink::Then {
    const bool ok = beat ? r.keep_alive() : true;
    const auto liveness = ok && check ? r.check_members() : Rendezvous::Liveness{};
    return [this, beat, ok, liveness] {
      if (beat && ok) {
        last_ok_ = Clock::now();
        if (lost_ && !done_ && hooks_.regained) hooks_.regained();
        lost_ = false;
      }
      answered(liveness);
    };
  });
}

void KeepAlive::answered(const Rendezvous::Liveness& l) {
  in_flight_ = false;
  if (!l.dead.empty() && !done_ && hooks_.judging()) hooks_.dead(l);
}

}  // namespace cxxrun::agent
