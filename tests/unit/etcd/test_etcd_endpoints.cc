#include <catch2/catch.hpp>

#include "etcd/endpoints.h"
#include "etcd/errors.h"

using namespace cxxrun::etcd;

namespace {

std::vector<Endpoint> parse(const std::string& text, Protocol p = Protocol::http) {
  return parse_endpoints({text}, p);
}

std::string endpoints_error(const std::string& text, Protocol p = Protocol::http) {
  try {
    parse(text, p);
  } catch (const EtcdError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("etcd endpoints: host:port lists") {
  auto list = parse("h1:2379,h2:23790, 10.0.0.3:1");
  REQUIRE(list.size() == 3);
  CHECK(list[0] == Endpoint{"h1", 2379});
  CHECK(list[1] == Endpoint{"h2", 23790});
  CHECK(list[2] == Endpoint{"10.0.0.3", 1});
  // Several entries, each possibly a list, in order.
  auto more = parse_endpoints({"a:1", "b:2,c:3"}, Protocol::http);
  REQUIRE(more.size() == 3);
  CHECK(more[2] == Endpoint{"c", 3});
}

TEST_CASE("etcd endpoints: a missing port is etcd's 2379") {
  CHECK(parse("node")[0] == Endpoint{"node", 2379});
  CHECK(parse("[::1]")[0] == Endpoint{"::1", 2379});
}

TEST_CASE("etcd endpoints: IPv6 in brackets, or bare without a port") {
  CHECK(parse("[::1]:2379")[0] == Endpoint{"::1", 2379});
  CHECK(parse("[fe80::1]:12,[::2]:13")[1] == Endpoint{"::2", 13});
  CHECK(parse("fe80::1")[0] == Endpoint{"fe80::1", 2379});
  CHECK(Endpoint{"::1", 2379}.text() == "[::1]:2379");
  CHECK(Endpoint{"h", 1}.text() == "h:1");
}

TEST_CASE("etcd endpoints: a scheme must match the protocol") {
  CHECK(parse("http://h:1/")[0] == Endpoint{"h", 1});
  CHECK(parse("https://h:1", Protocol::https)[0] == Endpoint{"h", 1});
  CHECK_THAT(endpoints_error("https://h:1"), Catch::Contains("an https:// endpoint for a client set up for http"));
  CHECK_THAT(endpoints_error("http://h:1", Protocol::https), Catch::Contains("an http:// endpoint"));
}

TEST_CASE("etcd endpoints: mistakes are named") {
  CHECK_THAT(endpoints_error("h:99999"), Catch::Contains("etcd endpoint 'h:99999'") && Catch::Contains("port"));
  CHECK_THAT(endpoints_error("h:0"), Catch::Contains("port"));
  CHECK_THAT(endpoints_error("h:x"), Catch::Contains("port"));
  CHECK_THAT(endpoints_error("h:"), Catch::Contains("port"));
  CHECK_THAT(endpoints_error("[::1:2379"), Catch::Contains("']'"));
  CHECK_THAT(endpoints_error("[::1]x"), Catch::Contains("':port'"));
  CHECK_THAT(endpoints_error("a:1,,b:2"), Catch::Contains("empty"));
  CHECK_THAT(endpoints_error(":2379"), Catch::Contains("no host"));
  CHECK_THAT(endpoints_error("h:1/v3"), Catch::Contains("path"));
  CHECK_THAT(endpoints_error(""), Catch::Contains("empty"));
  CHECK_THROWS_AS(parse_endpoints({}, Protocol::http), EtcdError);
}

TEST_CASE("etcd endpoints: addresses and names") {
  CHECK(is_ip_address("127.0.0.1"));
  CHECK(is_ip_address("::1"));
  CHECK_FALSE(is_ip_address("localhost"));
  CHECK_FALSE(is_ip_address("10.0.0"));
}
