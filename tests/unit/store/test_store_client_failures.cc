// Store client under trouble: no server, late server, dropped connections,
// waits that time out. Each case bounds its own duration.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "store/client.h"
#include "net/endpoint.h"
#include "scripted_store_server.h"

using namespace cxxrun::store;
using cxxrun::net::pick_free_port;
using namespace std::chrono_literals;
using scripted::expect;
using scripted::reply;
using SteadyClock = std::chrono::steady_clock;

namespace {

StoreClient::Options failing_options(int port, Protocol protocol,
                             std::chrono::milliseconds timeout = 5000ms) {
  StoreClient::Options o;
  o.port = port;
  o.protocol = protocol;
  o.timeout = timeout;
  return o;
}

void handshake_failing(const scripted::Socket& sock) {
  expect(sock, "00 cef7853c");
  expect(sock, "0d " + scripted::pid_hex());
  reply(sock, scripted::pid_hex());
}

void check_clean_failure(scripted::Server& server) {
  server.join();
  for (const auto& e : server.errors) FAIL(e);
}

const std::string kSetK1 = "00 0300000000000000 2f6b31 0200000000000000 7631";  // legacy
const std::string kAddCnt = "03 0400000000000000 2f636e74 0500000000000000";    // legacy

}  // namespace

TEST_CASE("store client: nobody listening gives StoreTimeout at the deadline") {
  int port = pick_free_port("127.0.0.1");
  auto start = SteadyClock::now();
  try {
    StoreClient::connect(failing_options(port, Protocol::modern, 400ms));
    FAIL("connected to a closed port");
  } catch (const StoreTimeout& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("127.0.0.1:" + std::to_string(port)) && Catch::Contains("refused"));
  }
  auto elapsed = SteadyClock::now() - start;
  CHECK(elapsed >= 380ms);
  CHECK(elapsed < 1500ms);
}

TEST_CASE("store client: a server that comes up late is reached by retrying") {
  int port = pick_free_port("127.0.0.1");
  std::thread late([port] {
    std::this_thread::sleep_for(300ms);
    scripted::Socket listener(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    int one = 1;
    setsockopt(listener.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return;
    listen(listener.fd(), 1);
    pollfd p{listener.fd(), POLLIN, 0};
    if (poll(&p, 1, 5000) != 1) return;
    scripted::Socket conn(accept4(listener.fd(), nullptr, nullptr, SOCK_NONBLOCK));
    scripted::drain_until_closed(conn);
  });
  auto client = StoreClient::connect(failing_options(port, Protocol::legacy, 5000ms));
  CHECK(client->local_address() == "127.0.0.1");
  client.reset();
  late.join();
}

TEST_CASE("store client: a modern handshake to a legacy server times out with a hint") {
  scripted::Server server(1, [](const scripted::Socket& sock, int) {
    scripted::drain_until_closed(sock);  // a 1.13 server reads VALIDATE as a SET and says nothing
  });
  auto start = SteadyClock::now();
  CHECK_THROWS_WITH(StoreClient::connect(failing_options(server.port, Protocol::modern, 300ms)),
                    Catch::Contains("legacy"));
  CHECK(SteadyClock::now() - start < 1500ms);
  check_clean_failure(server);
}

TEST_CASE("store client: a server that drops every handshake is named a legacy one") {
  scripted::Server server(3, [](const scripted::Socket& sock, int) {
    scripted::read_n(sock, 1);  // torch 1.13 fails to parse VALIDATE as a SET and hangs up
  });
  auto start = SteadyClock::now();
  try {
    StoreClient::connect(failing_options(server.port, Protocol::modern, 5000ms));
    FAIL("connected");
  } catch (const StoreTimeout& e) {
    FAIL(std::string("timed out instead: ") + e.what());
  } catch (const StoreError& e) {
    CHECK_THAT(e.what(), Catch::Contains("legacy") && Catch::Contains("3 connections in a row"));
  }
  CHECK(SteadyClock::now() - start < 2000ms);
  check_clean_failure(server);
}

TEST_CASE("store client: modern wait timeout cancels the wait and keeps the connection") {
  bool racing = GENERATE(false, true);
  scripted::Server server(1, [racing](const scripted::Socket& sock, int) {
    handshake_failing(sock);
    expect(sock, "06 0100000000000000 0300000000000000 2f6b31");
    expect(sock, "0c");  // CANCEL_WAIT, once the client gave up
    // The key may have appeared just then: STOP_WAITING before WAIT_CANCELED.
    reply(sock, racing ? "00 01" : "01");
    expect(sock, "01 0300000000000000 2f6b31 0200000000000000 7631");
  });
  auto client = StoreClient::connect(failing_options(server.port, Protocol::modern));
  auto start = SteadyClock::now();
  try {
    client->get("k1", 200ms);
    FAIL("get returned");
  } catch (const StoreTimeout& e) {
    CHECK_THAT(e.what(),
               Catch::Contains("wait timeout after 200 ms, keys: /k1") && Catch::Contains("get"));
  }
  auto elapsed = SteadyClock::now() - start;
  CHECK(elapsed >= 190ms);
  CHECK(elapsed < 1500ms);
  client->set("k1", "v1");  // same connection: the server serves only one
  check_clean_failure(server);
}

TEST_CASE("store client: legacy wait timeout drops the connection and the next call reconnects") {
  scripted::Server server(2, [](const scripted::Socket& sock, int index) {
    if (index == 0) {
      expect(sock, "05 0200000000000000 0200000000000000 2f61 0200000000000000 2f62");
      // 1.13 cannot cancel: it would answer later; the client must not wait.
      if (!scripted::client_closed(sock)) throw std::runtime_error("bytes after the WAIT");
    } else {
      expect(sock, kSetK1);
    }
  });
  auto client = StoreClient::connect(failing_options(server.port, Protocol::legacy));
  CHECK_THROWS_AS(client->wait({"a", "b"}, 150ms), StoreTimeout);
  client->set("k1", "v1");
  check_clean_failure(server);
  CHECK(server.served == 2);
}

TEST_CASE("store client: a safe request is resent after the server drops the connection") {
  scripted::Server server(2, [](const scripted::Socket& sock, int index) {
    expect(sock, "05 0100000000000000 0300000000000000 2f6b31");
    if (index == 0) return;  // closes mid-call
    reply(sock, "00");
    expect(sock, "02 0300000000000000 2f6b31");
    reply(sock, "0200000000000000 7631");
  });
  auto client = StoreClient::connect(failing_options(server.port, Protocol::legacy));
  CHECK(client->get("k1") == "v1");
  check_clean_failure(server);
}

TEST_CASE("store client: ADD is not resent once it may have reached the server") {
  scripted::Server server(1, [](const scripted::Socket& sock, int) {
    expect(sock, kAddCnt);  // then closes without answering
  });
  auto client = StoreClient::connect(failing_options(server.port, Protocol::legacy));
  try {
    client->add("cnt", 5);
    FAIL("add returned");
  } catch (const StoreTimeout& e) {
    FAIL(std::string("timed out instead: ") + e.what());
  } catch (const StoreError& e) {
    CHECK_THAT(e.what(), Catch::Contains("add") && Catch::Contains("not sent again") &&
                             Catch::Contains("127.0.0.1:" + std::to_string(server.port)));
  }
  check_clean_failure(server);
}

TEST_CASE("store client: a connection the server closed while idle is replaced before ADD") {
  scripted::Server server(2, [](const scripted::Socket& sock, int index) {
    if (index == 0) return;  // e.g. the server restarted between two calls
    expect(sock, kAddCnt);
    reply(sock, "0700000000000000");
  });
  auto client = StoreClient::connect(failing_options(server.port, Protocol::legacy));
  std::this_thread::sleep_for(100ms);  // let the close arrive
  CHECK(client->add("cnt", 5) == 7);
  check_clean_failure(server);
}

TEST_CASE("store client: a server that drops every attempt gives up with StoreError") {
  scripted::Server server(3, [](const scripted::Socket& sock, int) { expect(sock, "06"); });
  auto start = SteadyClock::now();
  auto client = StoreClient::connect(failing_options(server.port, Protocol::legacy));
  CHECK_THROWS_WITH(client->num_keys(), Catch::Contains("3 connections in a row"));
  CHECK(SteadyClock::now() - start < 3000ms);
  check_clean_failure(server);
}

TEST_CASE("store client: a reply that never comes is a StoreTimeout naming the op") {
  scripted::Server server(1, [](const scripted::Socket& sock, int) {
    expect(sock, "06");
    scripted::drain_until_closed(sock);
  });
  auto client = StoreClient::connect(failing_options(server.port, Protocol::legacy, 200ms));
  CHECK_THROWS_WITH(client->num_keys(), Catch::Contains("num_keys") && Catch::Contains("200 ms"));
  client.reset();
  check_clean_failure(server);
}
