#include "agent/keep_alive.h"

#include "agent/rendezvous_link.h"

namespace cxxrun::agent {

using rendezvous::Rendezvous;

KeepAlive::KeepAlive(boost::asio::io_context& io, RendezvousLink& link, std::chrono::milliseconds interval,
                     Hooks hooks)
    : link_(link), interval_(interval), hooks_(std::move(hooks)), timer_(io) {
  if (interval_.count() > 0) schedule();
}

void KeepAlive::cancel() {
  cancelled_ = true;
  timer_.cancel();
}

void KeepAlive::schedule() {
  timer_.expires_after(interval_ / 4);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || cancelled_) return;
    if (!hooks_.paused() && !in_flight_) tick();
    schedule();
  });
}

void KeepAlive::tick() {
  const bool judging = hooks_.judging();
  if (ticks_++ % 4 != 0) {
    if (!judging) return;
    in_flight_ = true;
    return link_.call([this](Rendezvous& r) -> RendezvousLink::Then {
      auto liveness = r.check_members();
      return [this, liveness] { answered(liveness); };
    });
  }
  in_flight_ = true;
  link_.call([this, judging](Rendezvous& r) -> RendezvousLink::Then {
    const Rendezvous::Beat beat = r.keep_alive();
    const auto liveness = beat == Rendezvous::Beat::ok && judging ? r.check_members() : Rendezvous::Liveness{};
    return [this, beat, liveness] {
      answered(liveness);
      if (beat == Rendezvous::Beat::lost && !cancelled_) hooks_.lost();
    };
  });
}

void KeepAlive::answered(const Rendezvous::Liveness& l) {
  in_flight_ = false;
  if (!l.dead.empty() && !cancelled_ && hooks_.judging()) hooks_.dead(l);
}

}  // namespace cxxrun::agent
