// GlooStore: the blocking get Gloo's connectFullMesh relies on, and one
// deadline for the whole bootstrap.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "fake_store.h"
#include "worker_runtime/bootstrap.h"
#include "worker_runtime/gloo_store.h"

using namespace cxxrun::worker;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

TEST_CASE("GlooStore get blocks until another rank sets the key") {
  FakeStore fake;
  FakeStore::Client mine(fake, "127.0.0.1"), theirs(fake, "127.0.0.1");
  GlooStore store(mine, Clock::now() + 5s);
  std::thread later([&] {
    std::this_thread::sleep_for(100ms);
    theirs.set("rank_1", std::string("a\0b", 3));
  });
  auto value = store.get("rank_1");
  later.join();
  CHECK(value == std::vector<char>{'a', '\0', 'b'});
  store.set("rank_0", {'x'});
  CHECK(theirs.get("rank_0") == "x");
}

TEST_CASE("GlooStore calls share one deadline") {
  FakeStore fake;
  FakeStore::Client client(fake, "127.0.0.1");
  GlooStore store(client, Clock::now() + 300ms);
  auto start = Clock::now();
  // Gloo's own wait timeout is longer than what is left: the deadline wins.
  CHECK_THROWS_AS(store.wait({"never"}, std::chrono::milliseconds(30000)), cxxrun::store::StoreTimeout);
  CHECK(Clock::now() - start < 2s);
  start = Clock::now();
  CHECK_THROWS_AS(store.get("never"), cxxrun::store::StoreTimeout);
  CHECK(Clock::now() - start < 200ms);  // nothing left of the budget
}

TEST_CASE("GlooStore wait honours a timeout shorter than the deadline") {
  FakeStore fake;
  FakeStore::Client client(fake, "127.0.0.1");
  GlooStore store(client, Clock::now() + 60s);
  auto start = Clock::now();
  CHECK_THROWS_AS(store.wait({"never"}, std::chrono::milliseconds(100)), cxxrun::store::StoreTimeout);
  CHECK(Clock::now() - start < 5s);
}

TEST_CASE("Gloo binds the explicit address, else GLOO_SOCKET_IFNAME, else the store connection's") {
  FakeStore fake;
  FakeStore::Client client(fake, "10.1.2.3");
  BootstrapEnv env;
  Options options;
  bool is_interface = true;
  CHECK(choose_bind_address(options, env, client, &is_interface) == "10.1.2.3");
  CHECK_FALSE(is_interface);
  env.socket_ifname = "eth1";
  CHECK(choose_bind_address(options, env, client, &is_interface) == "eth1");
  CHECK(is_interface);
  options.bind_address = "192.168.7.7";
  CHECK(choose_bind_address(options, env, client, &is_interface) == "192.168.7.7");
  CHECK_FALSE(is_interface);
}
