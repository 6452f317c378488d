// Keeps this node's record on the job board (rendezvous/job_board.h) fresh
// for cxxrunctl: every kBoardInterval, and soon after each change the
// supervisor reports, the record (agent/report/board_record.h, built on the
// loop) goes through the rendezvous link, off the loop. At most one publish
// is in the link at a time: one that is still there when the next is due
// (the link is in a rejoin, the store is slow) makes the next wait, and a
// change meanwhile is sent once it returns.
//
// The publish's answer carries the job's stop request (cxxrunctl stop): a
// request made after this agent started is handed to `on_stop` once, on
// the loop.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>

#include "rendezvous/job_board.h"

namespace cxxrun::rendezvous {
class Rendezvous;
}

namespace cxxrun::agent {

class RendezvousLink;

inline constexpr std::chrono::milliseconds kBoardInterval{2000};

class JobBoard {
 public:
  // `record()` gives the record now (on the loop); `started_ms`: when this
  // agent started (wall clock, ms since the epoch), the oldest stop
  // request it obeys.
  JobBoard(boost::asio::io_context& io, RendezvousLink& link, std::string node, std::function<std::string()> record,
           std::function<void(const rendezvous::board::StopRequest&)> on_stop, long long started_ms);
  // Publishes now and every kBoardInterval after.
  void start();
  // Something the record shows changed: publish soon (now, or once the
  // publish in the link returns).
  void changed();
  void cancel();
  // The agent's last record (its phase done), published at once, blocking
  // up to the publish's own deadline: only after the loop ended and the
  // link's thread was joined, so nothing else calls the rendezvous. A
  // publish still queued in the link when it went is dropped with it, and
  // where the store outlives the agent (etcd, cxxrun-rdzv) the board would
  // show the node running until its record went stale: cxxrunctl stop would
  // wait out its deadline for a stop it cannot see. Nothing after cancel()
  // alone, or when start() never ran.
  void last(rendezvous::Rendezvous& r);

  // This agent's id on the board: host, agent pid and a start time, so two
  // agents on one host, or a restarted agent, never share a record.
  static std::string node_id(const std::string& host, long long started_ms);

 private:
  void schedule();
  void publish();

  RendezvousLink& link_;
  const std::string node_;
  std::function<std::string()> record_;
  std::function<void(const rendezvous::board::StopRequest&)> on_stop_;
  const long long started_ms_;
  boost::asio::steady_timer timer_;
  bool in_flight_ = false;
  bool again_ = false;     // a change came while a publish was in the link
  bool stopped_ = false;   // on_stop was called
  bool cancelled_ = false;
  bool started_ = false;
};

}  // namespace cxxrun::agent
