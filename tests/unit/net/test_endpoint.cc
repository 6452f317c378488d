#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <stdexcept>

#include "listener.h"
#include "net/endpoint.h"

using namespace cxxrun::net;


TEST_CASE("endpoint: host and port forms") {
  auto e = parse_endpoint("node1:1234", 29400);
  CHECK(e.host == "node1");
  CHECK(e.port == 1234);

  e = parse_endpoint("node1", 29400);
  CHECK(e.host == "node1");
  CHECK(e.port == 29400);

  e = parse_endpoint("  10.0.0.1:0 ", 29400);
  CHECK(e.host == "10.0.0.1");
  CHECK(e.port == 0);

  e = parse_endpoint("", 29400);
  CHECK(e.host == "localhost");
  CHECK(e.port == 29400);

  e = parse_endpoint("node1", kNoPort);
  CHECK(e.port == kNoPort);
}

TEST_CASE("endpoint: IPv6 in brackets, with and without a port") {
  auto e = parse_endpoint("[::1]:29500", 1);
  CHECK(e.host == "::1");
  CHECK(e.port == 29500);

  e = parse_endpoint("[fe80::1]", 29400);
  CHECK(e.host == "fe80::1");
  CHECK(e.port == 29400);

  // A bare IPv6 address is the host, not host "fe80:" and port 1.
  e = parse_endpoint("fe80::1", 29400);
  CHECK(e.host == "fe80::1");
  CHECK(e.port == 29400);
}

TEST_CASE("endpoint: bad ports and hosts are refused with the text in the message") {
  CHECK_THROWS_WITH(parse_endpoint("node1:70000", 1), Catch::Contains("'node1:70000'"));
  CHECK_THROWS_AS(parse_endpoint("node1:", 1), std::invalid_argument);
  CHECK_THROWS_AS(parse_endpoint("node1:http", 1), std::invalid_argument);
  CHECK_THROWS_AS(parse_endpoint("[::1", 1), std::invalid_argument);
  CHECK_THROWS_AS(parse_endpoint("[::1]x", 1), std::invalid_argument);
  CHECK_THROWS_AS(parse_endpoint("no de:1", 1), std::invalid_argument);
  CHECK_THROWS_AS(parse_endpoint("[]:1", 1), std::invalid_argument);
  // Colons make a host an IPv6 address, and these are none: refused here,
  // not after join_timeout as a host that never answered.
  CHECK_THROWS_WITH(parse_endpoint(":::", 1), Catch::Contains("':::'"));
  CHECK_THROWS_AS(parse_endpoint("[:::]:29400", 1), std::invalid_argument);
  CHECK_THROWS_AS(parse_endpoint("fe80:::1", 1), std::invalid_argument);
  CHECK_THROWS_AS(parse_endpoint("1:2:3", 1), std::invalid_argument);
  CHECK(parse_endpoint("::", 29400).host == "::");
}

TEST_CASE("endpoint: format brackets IPv6 only") {
  CHECK(format_endpoint({"::1", 5}) == "[::1]:5");
  CHECK(format_endpoint({"host", 5}) == "host:5");
  CHECK(parse_endpoint(format_endpoint({"fe80::2", 77}), 1).host == "fe80::2");
}

TEST_CASE("pick_free_port returns a bindable port, and a new one while the first is held") {
  int first = pick_free_port("127.0.0.1");
  CHECK(first > 0);
  CHECK(first <= 65535);
  CHECK_FALSE(port_in_use("127.0.0.1", first));

  Listener held;
  CHECK(pick_free_port("127.0.0.1") != held.port);
  CHECK_THROWS_AS(pick_free_port("no-such-host.invalid"), std::system_error);
}

TEST_CASE("port_in_use sees a listening socket, on the address and via localhost") {
  Listener held;
  CHECK(port_in_use("127.0.0.1", held.port));
  CHECK(port_in_use("localhost", held.port));
  // Unresolvable hosts say nothing about the port.
  CHECK_FALSE(port_in_use("no-such-host.invalid", held.port));
}

TEST_CASE("port_in_use is false once the listener is gone") {
  int port = 0;
  {
    Listener held;
    port = held.port;
    REQUIRE(port_in_use("127.0.0.1", port));
  }
  CHECK_FALSE(port_in_use("127.0.0.1", port));
}

TEST_CASE("is_local_host: loopback and own name yes, wildcard and others no") {
  CHECK(is_local_host("localhost"));
  CHECK(is_local_host("LOCALHOST"));
  CHECK(is_local_host("127.0.0.1"));
  CHECK(is_local_host("127.1.2.3"));
  CHECK(is_local_host("::1"));
  CHECK(is_local_host("[::1]"));
  char self[256] = {};
  REQUIRE(gethostname(self, sizeof self - 1) == 0);
  CHECK(is_local_host(self));

  CHECK_FALSE(is_local_host("0.0.0.0"));
  CHECK_FALSE(is_local_host("::"));
  CHECK_FALSE(is_local_host("10.1.2.3"));
  CHECK_FALSE(is_local_host("node-17.cluster"));
}

TEST_CASE("address_toward: the address a peer sees this host by") {
  // Loopback peers see a loopback address; the same answer a connected
  // socket's local_ip() gives.
  CHECK(address_toward("127.0.0.1", 2379) == "127.0.0.1");
  CHECK(is_local_host(address_toward("localhost", 1)));
  CHECK_THROWS_WITH(address_toward("no-such-host.invalid", 2379), Catch::Contains("no-such-host.invalid:2379"));
}
