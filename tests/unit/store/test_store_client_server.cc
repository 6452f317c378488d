// Our client against our server, both protocols, over real sockets.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <system_error>

#include "store/client.h"
#include "store/server.h"
#include "vanishing_store.h"

using namespace cxxrun::store;
using namespace std::chrono_literals;

namespace {

std::unique_ptr<StoreClient> server_client_of(const BackgroundStoreServer& server, Protocol protocol,
                                       const std::string& host = "127.0.0.1") {
  StoreClient::Options o;
  o.host = host;
  o.port = server.port();
  o.protocol = protocol;
  o.timeout = 5s;
  return StoreClient::connect(o);
}

}  // namespace

TEST_CASE("store client and server: every op on both protocols") {
  BackgroundStoreServer server({"127.0.0.1", 0});
  auto protocol = GENERATE(Protocol::modern, Protocol::legacy);
  auto client = server_client_of(server, protocol);

  client->set("k1", "v1");
  CHECK(client->get("k1") == "v1");
  CHECK(client->add("cnt", 5) == 5);
  CHECK(client->add("cnt", -2) == 3);
  CHECK(client->get("cnt") == "3");
  CHECK(client->compare_set("cas", "", "first") == "first");
  CHECK(client->compare_set("cas", "first", "second") == "second");
  CHECK(client->compare_set("cas", "wrong", "third") == "second");
  CHECK(client->compare_set("absent", "x", "y") == "x");
  CHECK(client->check({"k1", "cnt"}));
  CHECK_FALSE(client->check({"k1", "nope"}));
  CHECK(client->num_keys() == 3);
  CHECK(client->delete_key("k1"));
  CHECK_FALSE(client->delete_key("k1"));

  CHECK_THROWS_WITH(client->get("nope", 150ms), Catch::Contains("wait timeout after 150 ms"));
  CHECK_THROWS_AS(client->wait({"cnt", "nope"}, 100ms), StoreTimeout);
  // Usable afterwards: cancelled (modern) or reconnected (legacy).
  CHECK(client->get("cas") == "second");

  if (protocol == Protocol::modern) {
    client->append("app", "a");
    client->append("app", "b");
    CHECK(client->get("app") == "ab");
    client->multi_set({"m1", "m2"}, {"x", ""});
    CHECK(client->multi_get({"m1", "m2"}) == std::vector<std::string>{"x", ""});
  }
  CHECK(client->local_address() == "127.0.0.1");
}

TEST_CASE("store client and server: a WAIT ends when another client sets the key") {
  BackgroundStoreServer server({"127.0.0.1", 0});
  auto waiter = server_client_of(server, Protocol::modern);
  auto setter = server_client_of(server, Protocol::legacy);  // one key space for both tables
  auto start = std::chrono::steady_clock::now();
  auto got = std::async(std::launch::async, [&] { return waiter->get("late", 5s); });
  std::this_thread::sleep_for(100ms);
  setter->set("late", "here");
  REQUIRE(got.wait_for(3s) == std::future_status::ready);
  CHECK(got.get() == "here");
  CHECK(std::chrono::steady_clock::now() - start < 3s);
}

TEST_CASE("store client and server: the client reconnects to a restarted server") {
  auto first = std::make_unique<BackgroundStoreServer>(StoreServerOptions{"127.0.0.1", 0});
  int port = first->port();
  StoreClient::Options o;
  o.port = port;
  o.timeout = 5s;
  auto client = StoreClient::connect(o);
  client->set("before", "1");
  first.reset();
  BackgroundStoreServer second({"127.0.0.1", port});
  // ADD too: the dead connection is noticed before anything is sent on it.
  CHECK(client->add("after", 1) == 1);
  CHECK(client->check({"after"}));
  CHECK_FALSE(client->check({"before"}));  // a new server, a new key space
}

TEST_CASE("store client and server: IPv6 loopback gives a numeric local_address") {
  std::unique_ptr<BackgroundStoreServer> server;
  try {
    server = std::make_unique<BackgroundStoreServer>(StoreServerOptions{"::1", 0});
  } catch (const std::system_error& e) {
    WARN("no IPv6 loopback here: " << e.what());
    return;
  }
  auto client = server_client_of(*server, Protocol::modern, "::1");
  client->set("v6", "yes");
  CHECK(client->get("v6") == "yes");
  CHECK(client->local_address() == "::1");
}

TEST_CASE("store client and server: set_timeout bounds the calls after it") {
  auto server = std::make_unique<BackgroundStoreServer>(StoreServerOptions{"127.0.0.1", 0});
  StoreClient::Options o;
  o.port = server->port();
  o.timeout = 600s;  // the test would time out if this still applied
  auto client = StoreClient::connect(o);
  client->set("k", "v");
  client->set_timeout(300ms);
  server.reset();  // gone: every reconnect is refused
  const auto started = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(client->set("k", "w"), StoreError);
  CHECK(std::chrono::steady_clock::now() - started < 60s);
}

TEST_CASE("store client and server: a value of the largest size goes in and comes back") {
  BackgroundStoreServer server({"127.0.0.1", 0});
  auto client = server_client_of(server, Protocol::modern);
  std::string value(8 << 20, '\0');
  for (size_t i = 0; i < value.size(); ++i) value[i] = static_cast<char>(i * 131 % 251);
  client->set("big", value);
  CHECK(client->get("big") == value);
  CHECK(client->add("after", 1) == 1);  // the stream is still in step
}

TEST_CASE("store client: a cancelled client stops reconnecting to a store that went away, long before its deadline") {
  // The agent leaving after its store died must not wait out read_timeout
  // in a call still reconnecting (Rendezvous::abandon).
  VanishingStore store;
  auto client = store.client();
  store.stop();
  auto call = std::async(std::launch::async, [&] { return client->add("k", 1); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // reconnecting by now
  const auto began = std::chrono::steady_clock::now();
  client->cancel();
  CHECK_THROWS_WITH(call.get(), Catch::Contains("cancelled"));
  CHECK(std::chrono::steady_clock::now() - began < std::chrono::seconds(10));
  CHECK_THROWS_AS(client->add("k", 1), StoreError);  // and at once afterwards
}
