// The proto3 wire primitives (etcd/protobuf.h): varints at their
// boundaries, defaults left out, and a reader that hands every field back.
// etcd's messages are checked against protobuf's own bytes in
// test_etcd_wire.cc.
#include <catch2/catch.hpp>
#include <cstdint>

#include "etcd/hex.h"
#include "etcd/protobuf.h"

using namespace cxxrun::etcd::protobuf;
using etcd_hex::hex;
using etcd_hex::unhex;

TEST_CASE("etcd protobuf: varints at their boundaries") {
  const std::pair<uint64_t, const char*> cases[] = {
      {0, "00"}, {1, "01"}, {127, "7f"}, {128, "8001"}, {300, "ac02"}, {16383, "ff7f"}, {16384, "808001"},
      {UINT64_MAX, "ffffffffffffffffff01"}, {uint64_t(INT64_MIN), "80808080808080808001"},
  };
  for (auto [value, bytes] : cases) {
    INFO(value);
    std::string out;
    append_varint(out, value);
    CHECK(hex(out) == bytes);
    const auto field = unhex(std::string("08") + bytes);
    Reader r(field);
    auto f = r.next();
    REQUIRE(f);
    CHECK(f->number == 1);
    CHECK(f->as_uint64() == value);
    CHECK_FALSE(r.next());
  }
}

TEST_CASE("etcd protobuf: the writer leaves defaults out but for oneof members and messages") {
  Writer w;
  w.varint(1, 0).int64(2, 0).boolean(3, false).bytes(4, "");
  CHECK(w.data().empty());
  w.varint_always(5, 0).bytes_always(6, "").message(7, "");
  CHECK(hex(w.data()) == "28003200" "3a00");
  CHECK(hex(Writer().int64(1, -2).boolean(2, true).bytes(3, std::string("\0", 1)).take()) ==
        "08feffffffffffffffff01" "1001" "1a0100");
  // Field numbers past 15 take a two-byte tag.
  CHECK(hex(Writer().varint(16, 1).take()) == "800101");
}

TEST_CASE("etcd protobuf: the reader returns every field, known or not") {
  // varint 150, fixed64, length-delimited "hi", fixed32, field 2^29-1.
  const auto message = unhex("089601" "110102030405060708" "1a026869" "2501020304" "f8ffffff0f07");
  Reader r(message);
  auto a = r.next();
  REQUIRE(a);
  CHECK(a->as_int64() == 150);
  auto b = r.next();
  REQUIRE(b);
  CHECK(b->type == WireType::fixed64);
  CHECK(b->value == 0x0807060504030201);
  auto c = r.next();
  REQUIRE(c);
  CHECK(c->number == 3);
  CHECK(c->as_bytes() == "hi");
  CHECK_THROWS_AS(c->as_uint64(), Malformed);
  CHECK_THROWS_AS(a->as_bytes(), Malformed);
  auto d = r.next();
  REQUIRE(d);
  CHECK(d->type == WireType::fixed32);
  CHECK(d->value == 0x04030201);
  auto e = r.next();
  REQUIRE(e);
  CHECK(e->number == (1u << 29) - 1);
  CHECK(e->as_bool());
  CHECK_FALSE(r.next());
}
