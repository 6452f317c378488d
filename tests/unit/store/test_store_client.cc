// The exact bytes the store client sends and how it reads the answers,
// checked against docs/store-protocol.md §2, §3 and §8 (torch 1.13's bytes and
// the 2.x table).
#include <catch2/catch.hpp>
#include <chrono>

#include "store/client.h"
#include "scripted_store_server.h"

using namespace cxxrun::store;
using namespace std::chrono_literals;
using scripted::expect;
using scripted::reply;

namespace {

StoreClient::Options options(int port, Protocol protocol) {
  StoreClient::Options o;
  o.port = port;
  o.protocol = protocol;
  o.timeout = 5000ms;
  return o;
}

void handshake(const scripted::Socket& sock) {
  expect(sock, "00 cef7853c");                // VALIDATE + magic
  expect(sock, "0d " + scripted::pid_hex());  // PING(pid)
  reply(sock, scripted::pid_hex());
}

void check_clean(scripted::Server& server) {
  server.join();
  for (const auto& e : server.errors) FAIL(e);
}

}  // namespace

TEST_CASE("store client: modern handshake then SET with the / prefix") {
  scripted::Server server(1, [](const scripted::Socket& sock, int) {
    handshake(sock);
    expect(sock, "01 0300000000000000 2f6b31 0200000000000000 7631");
    if (!scripted::client_closed(sock)) throw std::runtime_error("bytes after the SET");
  });
  {
    auto client = StoreClient::connect(options(server.port, Protocol::modern));
    client->set("k1", "v1");
    CHECK(client->local_address() == "127.0.0.1");
  }
  check_clean(server);
}

TEST_CASE("store client: legacy SET GET ADD NUM_KEYS DELETE match torch 1.13 bytes") {
  scripted::Server server(1, [](const scripted::Socket& sock, int) {
    // No handshake: the first byte is already the SET.
    expect(sock, "00 0300000000000000 2f6b31 0200000000000000 7631");
    // get = WAIT, and only after STOP_WAITING the GET.
    expect(sock, "05 0100000000000000 0300000000000000 2f6b31");
    reply(sock, "00");
    expect(sock, "02 0300000000000000 2f6b31");
    reply(sock, "0200000000000000 7631");
    expect(sock, "03 0400000000000000 2f636e74 0500000000000000");
    reply(sock, "0500000000000000");
    expect(sock, "06");
    reply(sock, "0300000000000000");
    expect(sock, "08 0300000000000000 2f6b31");
    reply(sock, "0100000000000000");
  });
  auto client = StoreClient::connect(options(server.port, Protocol::legacy));
  client->set("k1", "v1");
  CHECK(client->get("k1") == "v1");
  CHECK(client->add("cnt", 5) == 5);
  CHECK(client->num_keys() == 3);
  CHECK(client->delete_key("k1"));
  check_clean(server);
}

TEST_CASE("store client: COMPARE_SET and CHECK with modern opcodes and a custom prefix") {
  scripted::Server server(1, [](const scripted::Socket& sock, int) {
    handshake(sock);
    // "/p/" + "k": expected "" and desired "d".
    expect(sock, "02 0400000000000000 2f702f6b 0000000000000000 0100000000000000 64");
    reply(sock, "0100000000000000 64");
    expect(sock, "05 0200000000000000 0400000000000000 2f702f61 0400000000000000 2f702f62");
    reply(sock, "01");  // NOT_READY
    expect(sock, "05 0100000000000000 0400000000000000 2f702f61");
    reply(sock, "00");  // READY
  });
  auto o = options(server.port, Protocol::modern);
  o.key_prefix = "/p/";
  auto client = StoreClient::connect(o);
  CHECK(client->compare_set("k", "", "d") == "d");
  CHECK_FALSE(client->check({"a", "b"}));
  CHECK(client->check({"a"}));
  check_clean(server);
}

TEST_CASE("store client: get_if_set is one COMPARE_SET that changes nothing") {
  // Expected and desired are the same value no one stores: the answer is the
  // key's value, or, for an absent key, that value (torch's quirk).
  const std::string never = "0f00000000000000 0063787872756e3a616273656e7400";
  scripted::Server server(1, [&](const scripted::Socket& sock, int) {
    handshake(sock);
    expect(sock, "02 0400000000000000 2f657674 " + never + " " + never);
    reply(sock, "0500000000000000 61626f7274");  // "abort"
    expect(sock, "02 0400000000000000 2f6f7574 " + never + " " + never);
    reply(sock, never);  // absent
    expect(sock, "02 0400000000000000 2f656d70 " + never + " " + never);
    reply(sock, "0000000000000000");  // set, to ""
  });
  auto client = StoreClient::connect(options(server.port, Protocol::modern));
  CHECK(client->get_if_set("evt") == std::optional<std::string>("abort"));
  CHECK(client->get_if_set("out") == std::nullopt);
  CHECK(client->get_if_set("emp") == std::optional<std::string>(""));
  check_clean(server);
}

TEST_CASE("store client: compare_sets, get_if_set_each and add_and_get_if_set_each send every request before reading an answer") {
  // One round trip for the batch: the server gets all of it before it
  // answers anything, and the answers are taken in order.
  const std::string never = "0f00000000000000 0063787872756e3a616273656e7400";
  scripted::Server server(1, [&](const scripted::Socket& sock, int) {
    handshake(sock);
    expect(sock,
           "02 0600000000000000 2f726f756e64 0100000000000000 30 0100000000000000 31"
           " 02 0400000000000000 2f636667 0000000000000000 0100000000000000 63");
    reply(sock, "0100000000000000 31 0100000000000000 78");  // round 1, config "x" (someone else's)
    expect(sock,
           "02 0400000000000000 2f636e74 " + never + " " + never + " 02 0400000000000000 2f6f7574 " + never + " " +
               never);
    reply(sock, "0100000000000000 33 " + never);  // "3", absent
    expect(sock, "04 0400000000000000 2f636e74 0000000000000000 02 0400000000000000 2f6f7574 " + never + " " + never);
    reply(sock, "0300000000000000 0100000000000000 31");  // 3; "1"
  });
  auto client = StoreClient::connect(options(server.port, Protocol::modern));
  CHECK(client->compare_sets({{"round", "0", "1"}, {"cfg", "", "c"}}) == std::vector<std::string>{"1", "x"});
  CHECK(client->get_if_set_each({"cnt", "out"}) ==
        std::vector<std::optional<std::string>>{std::string("3"), std::nullopt});
  const auto counted = client->add_and_get_if_set_each("cnt", 0, {"out"});
  CHECK(counted.count == 3);
  CHECK(counted.values == std::vector<std::optional<std::string>>{std::string("1")});
  check_clean(server);
}

TEST_CASE("store client: APPEND MULTI_SET and MULTI_GET on a modern server") {
  scripted::Server server(1, [](const scripted::Socket& sock, int) {
    handshake(sock);
    expect(sock, "09 0200000000000000 2f61 0100000000000000 78");
    expect(sock,
           "0b 0200000000000000 0200000000000000 2f61 0100000000000000 31"
           " 0200000000000000 2f62 0000000000000000");
    expect(sock, "06 0200000000000000 0200000000000000 2f61 0200000000000000 2f62");
    reply(sock, "00");
    expect(sock, "0a 0200000000000000 0200000000000000 2f61 0200000000000000 2f62");
    reply(sock, "0100000000000000 31 0000000000000000");
  });
  auto client = StoreClient::connect(options(server.port, Protocol::modern));
  client->append("a", "x");
  client->multi_set({"a", "b"}, {"1", ""});
  CHECK(client->multi_get({"a", "b"}) == std::vector<std::string>{"1", ""});
  check_clean(server);
}

TEST_CASE("store client: modern-only ops fail on a legacy connection without sending") {
  scripted::Server server(1, [](const scripted::Socket& sock, int) {
    if (!scripted::client_closed(sock)) throw std::runtime_error("the client sent something");
  });
  {
    auto client = StoreClient::connect(options(server.port, Protocol::legacy));
    CHECK_THROWS_AS(client->append("a", "x"), StoreError);
    CHECK_THROWS_AS(client->multi_get({"a"}), StoreError);
    CHECK_THROWS_AS(client->multi_set({"a"}, {"x"}), StoreError);
  }
  check_clean(server);
}

TEST_CASE("store client: oversized keys and values are refused before sending") {
  scripted::Server server(1, [](const scripted::Socket& sock, int) {
    handshake(sock);
    if (!scripted::client_closed(sock)) throw std::runtime_error("the client sent something");
  });
  {
    auto client = StoreClient::connect(options(server.port, Protocol::modern));
    CHECK_THROWS_WITH(client->set(std::string(9000, 'k'), "v"),
                      Catch::Contains("exceeds the 8192-byte limit"));
    CHECK_THROWS_AS(client->set("k", std::string(8 * 1024 * 1024 + 1, 'v')), StoreError);
    CHECK_THROWS_AS(client->multi_set({"a", "b"}, {"1"}), StoreError);
  }
  check_clean(server);
}

TEST_CASE("store client: a wrong PING echo is a StoreError naming the server") {
  scripted::Server server(1, [](const scripted::Socket& sock, int) {
    expect(sock, "00 cef7853c");
    scripted::read_n(sock, 5);
    reply(sock, "01020304");
  });
  auto o = options(server.port, Protocol::modern);
  std::string endpoint = "127.0.0.1:" + std::to_string(server.port);
  try {
    StoreClient::connect(o);
    FAIL("connect succeeded");
  } catch (const StoreTimeout& e) {
    FAIL(std::string("timed out instead: ") + e.what());
  } catch (const StoreError& e) {
    CHECK_THAT(e.what(), Catch::Contains(endpoint) && Catch::Contains("PING"));
  }
  check_clean(server);
}
