#include "agent/job_board.h"

#include <unistd.h>

#include <optional>

#include "agent/rendezvous_link.h"

namespace cxxrun::agent {

JobBoard::JobBoard(boost::asio::io_context& io, RendezvousLink& link, std::string node,
                   std::function<std::string()> record,
                   std::function<void(const rendezvous::board::StopRequest&)> on_stop, long long started_ms)
    : link_(link), node_(std::move(node)), record_(std::move(record)), on_stop_(std::move(on_stop)),
      started_ms_(started_ms), timer_(io) {}

std::string JobBoard::node_id(const std::string& host, long long started_ms) {
  return host + "-" + std::to_string(::getpid()) + "-" + std::to_string(started_ms);
}

void JobBoard::start() {
  started_ = true;
  publish();
  schedule();
}

void JobBoard::changed() {
  if (cancelled_) return;
  if (in_flight_) {
    again_ = true;
    return;
  }
  publish();
}

void JobBoard::cancel() {
  cancelled_ = true;
  timer_.cancel();
}

void JobBoard::last(rendezvous::Rendezvous& r) {
  if (!started_) return;
  r.publish_board(node_, record_());
}

void JobBoard::schedule() {
  timer_.expires_after(kBoardInterval);
  timer_.async_wait([this](const boost::system::error_code& ec) {
    if (ec || cancelled_) return;
    if (!in_flight_) publish();
    schedule();
  });
}

void JobBoard::publish() {
  in_flight_ = true;
  again_ = false;
  link_.call([this, record = record_()](rendezvous::Rendezvous& r) -> RendezvousLink::Then {
    std::optional<rendezvous::board::StopRequest> stop = r.publish_board(node_, record);
    return [this, stop] {
      in_flight_ = false;
      if (cancelled_) return;
      if (stop && stop->at_ms >= started_ms_ && !stopped_) {
        stopped_ = true;
        on_stop_(*stop);
      }
      if (again_) publish();
    };
  });
}

}  // namespace cxxrun::agent
