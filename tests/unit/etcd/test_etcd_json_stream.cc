#include <catch2/catch.hpp>

#include "etcd/errors.h"
#include "etcd/json_stream.h"

using namespace cxxrun::etcd;

TEST_CASE("etcd json stream: objects split across feeds") {
  JsonStream s;
  s.feed("{\"result\":{\"a\":");
  CHECK_FALSE(s.next());
  s.feed("[1,{\"b\":2}]}}\n{\"x\"");
  CHECK(s.next() == std::optional<std::string>("{\"result\":{\"a\":[1,{\"b\":2}]}}"));
  CHECK_FALSE(s.next());
  s.feed(":1}");
  CHECK(s.next() == std::optional<std::string>("{\"x\":1}"));
  CHECK(s.buffered() == 0);
}

TEST_CASE("etcd json stream: several objects in one feed, with or without separators") {
  JsonStream s;
  s.feed("{\"a\":1}{\"b\":2}\r\n  {\"c\":3}\n");
  CHECK(s.next() == std::optional<std::string>("{\"a\":1}"));
  CHECK(s.next() == std::optional<std::string>("{\"b\":2}"));
  CHECK(s.next() == std::optional<std::string>("{\"c\":3}"));
  CHECK_FALSE(s.next());
}

TEST_CASE("etcd json stream: braces and quotes inside strings") {
  JsonStream s;
  s.feed(R"({"m":"a } { \" ] \\"})");
  s.feed(R"({"n":"\\\""})");
  CHECK(s.next() == std::optional<std::string>(R"({"m":"a } { \" ] \\"})"));
  CHECK(s.next() == std::optional<std::string>(R"({"n":"\\\""})"));
}

TEST_CASE("etcd json stream: a long stream does not keep what it consumed") {
  JsonStream s;
  std::string object = "{\"k\":\"" + std::string(1000, 'x') + "\"}\n";
  for (int i = 0; i < 100; ++i) {
    s.feed(object);
    REQUIRE(s.next());
  }
  CHECK_FALSE(s.next());  // the last newline
  CHECK(s.buffered() == 0);
}

TEST_CASE("etcd json stream: something other than objects is an error") {
  JsonStream s;
  s.feed("HTTP/1.1 200");
  CHECK_THROWS_AS(s.next(), EtcdError);
  s.clear();
  s.feed("{}");
  CHECK(s.next() == std::optional<std::string>("{}"));
}
