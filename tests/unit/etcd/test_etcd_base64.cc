#include <catch2/catch.hpp>

#include "etcd/base64.h"

using namespace cxxrun::etcd;

TEST_CASE("etcd base64: RFC 4648 test vectors") {
  const std::pair<const char*, const char*> vectors[] = {
      {"", ""}, {"f", "Zg=="}, {"fo", "Zm8="}, {"foo", "Zm9v"},
      {"foob", "Zm9vYg=="}, {"fooba", "Zm9vYmE="}, {"foobar", "Zm9vYmFy"},
  };
  for (auto [plain, encoded] : vectors) {
    CHECK(base64_encode(plain) == encoded);
    CHECK(base64_decode(encoded) == std::optional<std::string>(plain));
  }
}

TEST_CASE("etcd base64: every byte value survives a round trip") {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n : {size_t(0), size_t(1), size_t(2), size_t(3), size_t(255), size_t(256)}) {
    auto piece = all.substr(0, n);
    CHECK(base64_decode(base64_encode(piece)) == piece);
  }
  CHECK(base64_encode(std::string("\0\xff", 2)) == "AP8=");
}

TEST_CASE("etcd base64: the URL-safe alphabet decodes too") {
  CHECK(base64_decode("-_8=") == base64_decode("+/8="));
}

TEST_CASE("etcd base64: what is not base64") {
  CHECK_FALSE(base64_decode("Zm9"));     // length
  CHECK_FALSE(base64_decode("Zm9v!A==")); // alphabet
  CHECK_FALSE(base64_decode("Zg==Zm9v")); // padding before the end
  CHECK_FALSE(base64_decode("Z==="));     // too much padding
  CHECK_FALSE(base64_decode("Zg=v"));     // a character after padding
}
