// Straggler summaries through the c10d rendezvous (rendezvous/speed_board.h,
// Rendezvous::exchange_speed, node_speeds, tell_node, call_spare): what each
// node stores and reads, that group rank 0 never waits for a member that has
// not written yet, and that a spare is called in only when one waits.
#include <catch2/catch.hpp>
#include <future>
#include <thread>

#include "c10d_nodes.h"
#include "vanishing_store.h"

using namespace cxxrun::rendezvous;
using namespace c10d_nodes;
using namespace std::chrono_literals;

TEST_CASE("rendezvous: straggler summaries, by group rank, and what rank 0 tells a node") {
  FakeStore store;
  C10dBackend a = backend(store, "a"), b = backend(store, "b");
  auto ja = std::async(std::launch::async, [&] { return a.join(); });
  auto jb = std::async(std::launch::async, [&] { return b.join(); });
  const Assignment pa = ja.get(), pb = jb.get();
  C10dBackend& zero = pa.group_rank == 0 ? a : b;
  C10dBackend& one = pa.group_rank == 0 ? b : a;

  CHECK(zero.exchange_speed("summary of 0").empty());
  // Rank 1 has written nothing yet: read at once, empty (a TCPStore's
  // MULTI_GET would wait for it).
  const auto start = std::chrono::steady_clock::now();
  CHECK(zero.node_speeds() == std::vector<std::string>{"summary of 0", ""});
  CHECK(std::chrono::steady_clock::now() - start < 1s);
  CHECK(one.exchange_speed("summary of 1").empty());
  CHECK(zero.node_speeds() == std::vector<std::string>{"summary of 0", "summary of 1"});
  zero.tell_node(1, "you are slow");
  CHECK(one.exchange_speed("summary of 1, again") == "you are slow");
  CHECK(zero.exchange_speed("summary of 0, again").empty());
  zero.tell_node(1, "");
  CHECK(one.exchange_speed("x").empty());
  (void)pb;
}

TEST_CASE("rendezvous: a spare is called in only when one waits") {
  FakeStore store;
  C10dBackend a = backend(store, "a"), b = backend(store, "b");
  auto ja = std::async(std::launch::async, [&] { return a.join(); });
  auto jb = std::async(std::launch::async, [&] { return b.join(); });
  ja.get();
  jb.get();
  FakeStore::Client reader(store, "r");
  CHECK_FALSE(a.call_spare());
  CHECK_FALSE(reader.check({"cxxrun/rdzv/job/event/r0"}));
  C10dBackend spare = backend(store, "c");
  auto js = std::async(std::launch::async, [&] { return spare.join(); });
  // The spare waits beyond the full round (max 2).
  for (int i = 0; i < 100 && !a.call_spare(); ++i) std::this_thread::sleep_for(20ms);
  CHECK(reader.get("cxxrun/rdzv/job/event/r0") == "join");
  a.leave(false);
  b.leave(false);
  CHECK_THROWS(js.get());
}

namespace {

// The job's store as JobStore opens it, over a real store that the test
// stops: the main client with the long deadline (read_timeout), each other
// connection with the deadline its caller asks for.
class StoppableStateStore : public StateStore {
 public:
  explicit StoppableStateStore(VanishingStore& store) : store_(store), main_(store.client()) {}
  cxxrun::store::StoreClient& client() override { return *main_; }
  std::unique_ptr<cxxrun::store::StoreClient> connect_another(std::chrono::milliseconds timeout) const override {
    return store_.client(timeout);
  }
  void leave(bool, int, const std::function<void()>& first) override { first(); }

 private:
  VanishingStore& store_;
  std::unique_ptr<cxxrun::store::StoreClient> main_;
};

}  // namespace

TEST_CASE("rendezvous: a straggler exchange with a store that went away ends on a short deadline, not read_timeout") {
  // The exchange runs on the link thread, which also carries the
  // keep-alives: on the main client it waited out read_timeout (60 s here)
  // reconnecting, and the beats queued behind it delayed the lost-store
  // verdict by as much.
  VanishingStore store;
  RendezvousConfig config;
  config.backend = Backend::c10d;
  config.settings = settings(1, 1);
  config.settings.local_addr = "127.0.0.1";
  config.settings.read_timeout = VanishingStore::kLongDeadline;
  C10dBackend node(config, WorkerStorePlan{},
                   [&store](const RendezvousConfig&) { return std::make_unique<StoppableStateStore>(store); });
  REQUIRE(node.join().group_world_size == 1);
  CHECK(node.exchange_speed("summary").empty());  // the control: it works while the store runs
  store.stop();
  // Each call is one window's (the node's, then group rank 0's two).
  auto began = std::chrono::steady_clock::now();
  CHECK(node.exchange_speed("summary, again").empty());
  CHECK(std::chrono::steady_clock::now() - began < 10s);
  began = std::chrono::steady_clock::now();
  CHECK(node.node_speeds().empty());
  CHECK(std::chrono::steady_clock::now() - began < 10s);
  began = std::chrono::steady_clock::now();
  node.tell_node(0, "you are slow");
  CHECK(std::chrono::steady_clock::now() - began < 10s);
}
