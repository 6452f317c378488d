// An agent leaving because its TCPStore is gone (Rendezvous::abandon): no
// connection of the backend's may hold the exit for read_timeout, those a
// watch is still making on the link thread when the store dies included.
// The window test_elastic's killed-store test hit under load: the store died
// while the link was setting up cxxrunctl's request watch, whose connect
// retried for read_timeout while the agent's destructor joined the link.
#include <catch2/catch.hpp>
#include <atomic>
#include <chrono>
#include <memory>
#include <thread>

#include "rendezvous/c10d_backend.h"
#include "rendezvous/job_store.h"
#include "vanishing_store.h"

using namespace cxxrun::rendezvous;
using namespace std::chrono_literals;

namespace {

// One node of a one-node job at `store`, as the agent joins it: a client
// of the store (not its host), read_timeout the store's long deadline.
RendezvousConfig config_at(const VanishingStore& store) {
  RendezvousConfig c;
  c.backend = Backend::c10d;
  c.host = "127.0.0.1";
  c.port = store.port();
  c.is_host = false;
  RendezvousSettings& s = c.settings;
  s.run_id = "abandon";
  s.endpoint = "127.0.0.1:" + std::to_string(store.port());
  s.min_nodes = s.max_nodes = 1;
  s.local_world_size = 1;
  s.entrypoint = "train";
  s.local_addr = "127.0.0.1";
  s.join_timeout = 30s;
  s.read_timeout = VanishingStore::kLongDeadline;
  s.last_call_timeout = 100ms;
  return c;
}

std::unique_ptr<C10dBackend> joined_backend(const VanishingStore& store) {
  auto b = std::make_unique<C10dBackend>(config_at(store), WorkerStorePlan{},
                                         [](const RendezvousConfig& c) { return std::make_unique<JobStore>(c); });
  b->join();
  return b;
}

// Runs `setup` on a thread of its own (the link's), abandons the backend
// from this one once it is under way, and says whether the thread was done
// within `limit`; joins it either way.
template <class Setup>
bool done_after_abandon(C10dBackend& backend, Setup setup, std::chrono::seconds limit) {
  std::atomic<bool> done{false};
  std::thread link([&] {
    setup();
    done = true;
  });
  std::this_thread::sleep_for(300ms);  // retrying the connect by now, or about to
  backend.abandon();
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done && std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(20ms);
  const bool in_time = done;
  link.join();
  return in_time;
}

}  // namespace

TEST_CASE("c10d abandon: a request watch set up as the store died gives up its connect, not after read_timeout") {
  VanishingStore store;
  auto backend = joined_backend(store);
  store.stop();
  CHECK(done_after_abandon(*backend, [&] { backend->watch_requests([](long long, const std::string&) {}); }, 10s));
}

TEST_CASE("c10d abandon: a round watch set up as the store died gives up its connect, not after read_timeout") {
  VanishingStore store;
  auto backend = joined_backend(store);
  store.stop();
  CHECK(done_after_abandon(*backend, [&] { backend->watch([](int, RoundEvent) {}); }, 10s));
}
