// The agent's keep-alive pacing and its verdict on a lost store
// (agent/keep_alive.h), on a real loop and link over a rendezvous whose
// store answers or not.
#include <catch2/catch.hpp>

#include <atomic>
#include <thread>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/keep_alive.h"
#include "agent/rendezvous_link.h"
#include "fake_rendezvous.h"

using namespace cxxrun::agent;
using namespace cxxrun::rendezvous;
using namespace std::chrono_literals;

namespace {

struct Paced {
  boost::asio::io_context io;
  FakeRendezvous rdzv{true, 200ms};
  RendezvousLink link{io, rdzv};
  int lost = 0;
  KeepAlive keep_alive{io, link, 200ms, 3,
                       KeepAlive::Hooks{[] { return false; }, [] { return true; },
                                        [this](std::chrono::milliseconds) { ++lost; }, [] {},
                                        [](const Rendezvous::Liveness&) {}}};

  // Runs the loop for `d`, then stops the pacing.
  void run_for(std::chrono::milliseconds d) {
    boost::asio::steady_timer end(io, d);
    end.async_wait([this](const boost::system::error_code&) {
      keep_alive.cancel();
      io.stop();
    });
    io.run();
  }
};

}  // namespace

TEST_CASE("keep-alive: a store that stops answering is declared lost") {
  Paced p;
  p.rdzv.store_answers = false;
  p.run_for(2000ms);  // the limit is 600 ms
  CHECK(p.lost > 0);
}

TEST_CASE("keep-alive: a loop held up by the agent's own work does not count as the store's silence") {
  // 1.5 s of a loop that cannot tick (a spawn on a loaded host held an
  // agent 825 ms in CI), with a store that answers every beat sent: the
  // verdict was "lost the rendezvous store" and a healthy job stopped.
  Paced p;
  boost::asio::steady_timer busy(p.io, 150ms);
  busy.async_wait([](const boost::system::error_code&) { std::this_thread::sleep_for(1500ms); });
  p.run_for(2400ms);
  CHECK(p.lost == 0);
  CHECK(p.rdzv.beats >= 3);  // beats went on after it
}
