#include <catch2/catch.hpp>
#include <random>
#include <string>

#include "store/request.h"
#include "store/wire.h"
#include "store_wire_bytes.h"

using namespace cxxrun::store;
using store_bytes::LegacyOp;
using store_bytes::Msg;
using store_bytes::Op;
using ParseStatus = RequestParse::Status;

namespace {

RequestParse parse_bytes(const std::string& bytes, OpTable table) { return parse_request(bytes, table); }

// Parses a whole request and checks that it took every byte.
StoreRequest complete(const std::string& bytes, OpTable table) {
  RequestParse p = parse_bytes(bytes, table);
  INFO(p.error);
  REQUIRE(p.status == ParseStatus::complete);
  CHECK(p.consumed == bytes.size());
  CHECK(p.table == table);
  return p.request;
}

std::string header_only(uint8_t op, uint64_t length) { return Msg(op).u64(length); }

}  // namespace

TEST_CASE("store request: the first bytes decide the table") {
  RequestParse p = parse_bytes(store_bytes::validate(), OpTable::unknown);
  REQUIRE(p.status == ParseStatus::complete);
  CHECK(p.table == OpTable::modern);
  CHECK(p.consumed == 5);
  CHECK(p.request.command == StoreCommand::validate);
  CHECK(p.request.nonce == wire::kValidateMagic);

  // A prefix of VALIDATE cannot decide yet.
  for (size_t n = 1; n < 5; ++n) {
    p = parse_bytes(store_bytes::validate().substr(0, n), OpTable::unknown);
    CHECK(p.status == ParseStatus::need_more);
    CHECK(p.table == OpTable::unknown);
    CHECK(p.needed == 5);
  }

  // 1.13's usual openings.
  p = parse_bytes(Msg(LegacyOp::add).str("init/").i64(1), OpTable::unknown);
  CHECK(p.table == OpTable::legacy);
  CHECK(p.status == ParseStatus::complete);
  CHECK(p.request.command == StoreCommand::add);
  p = parse_bytes(Msg(LegacyOp::set).str("/k1").str("v1"), OpTable::unknown);
  CHECK(p.table == OpTable::legacy);
  CHECK(p.request.command == StoreCommand::set);
  // A legacy SET's first byte is 0 too, and is told apart by the next ones.
  p = parse_bytes(std::string(1, '\0'), OpTable::unknown);
  CHECK(p.table == OpTable::unknown);
  p = parse_bytes(std::string("\0\3", 2), OpTable::unknown);
  CHECK(p.table == OpTable::legacy);
  CHECK(p.status == ParseStatus::need_more);

  p = parse_bytes("", OpTable::unknown);
  CHECK(p.status == ParseStatus::need_more);
  CHECK(p.needed == 1);
}

TEST_CASE("store request: modern opcodes") {
  auto modern = OpTable::modern;
  StoreRequest r = complete(Msg(Op::set).str("/k").str("v"), modern);
  CHECK(r.command == StoreCommand::set);
  CHECK(r.keys == std::vector<std::string>{"/k"});
  CHECK(r.values == std::vector<std::string>{"v"});

  r = complete(Msg(Op::compare_set).str("/k").str("").str("new"), modern);
  CHECK(r.command == StoreCommand::compare_set);
  CHECK(r.values == std::vector<std::string>{"", "new"});

  r = complete(Msg(Op::get).str("/k"), modern);
  CHECK(r.command == StoreCommand::get);
  CHECK(r.keys == std::vector<std::string>{"/k"});

  r = complete(Msg(Op::add).str("/c").i64(-3), modern);
  CHECK(r.command == StoreCommand::add);
  CHECK(r.delta == -3);

  r = complete(Msg(Op::check).keys({"/a", "/b"}), modern);
  CHECK(r.command == StoreCommand::check);
  CHECK(r.keys == std::vector<std::string>{"/a", "/b"});

  r = complete(Msg(Op::wait).keys({}), modern);
  CHECK(r.command == StoreCommand::wait);
  CHECK(r.keys.empty());

  CHECK(complete(Msg(Op::get_num_keys), modern).command == StoreCommand::get_num_keys);
  CHECK(complete(Msg(Op::delete_key).str("/k"), modern).command == StoreCommand::delete_key);

  r = complete(Msg(Op::append).str("/k").str("more"), modern);
  CHECK(r.command == StoreCommand::append);
  CHECK(r.values == std::vector<std::string>{"more"});

  r = complete(Msg(Op::multi_get).keys({"/a", "/b", "/c"}), modern);
  CHECK(r.command == StoreCommand::multi_get);
  CHECK(r.keys.size() == 3);

  r = complete(Msg(Op::multi_set).u64(2).str("/a").str("1").str("/b").str("2"), modern);
  CHECK(r.command == StoreCommand::multi_set);
  CHECK(r.keys == std::vector<std::string>{"/a", "/b"});
  CHECK(r.values == std::vector<std::string>{"1", "2"});

  CHECK(complete(Msg(Op::cancel_wait), modern).command == StoreCommand::cancel_wait);

  r = complete(Msg(Op::ping).u32(4242), modern);
  CHECK(r.command == StoreCommand::ping);
  CHECK(r.nonce == 4242);

  r = complete(Msg(Op::queue_push).str("q").str("item"), modern);
  CHECK(r.command == StoreCommand::queue_push);
  CHECK(r.values == std::vector<std::string>{"item"});
  CHECK(complete(Msg(Op::queue_pop).str("q"), modern).command == StoreCommand::queue_pop);
  CHECK(complete(Msg(Op::queue_len).str("q"), modern).command == StoreCommand::queue_len);

  // VALIDATE again later is fine; a wrong magic is not.
  CHECK(complete(store_bytes::validate(), modern).command == StoreCommand::validate);
  RequestParse p = parse_bytes(Msg(Op::validate).u32(0x12345678), modern);
  CHECK(p.status == ParseStatus::error);
  CHECK_THAT(p.error, Catch::Contains("magic"));

  p = parse_bytes(Msg(17), modern);
  CHECK(p.status == ParseStatus::error);
  CHECK_THAT(p.error, Catch::Contains("unknown opcode 17"));
}

TEST_CASE("store request: legacy opcodes") {
  auto legacy = OpTable::legacy;
  CHECK(complete(Msg(LegacyOp::set).str("/k").str("v"), legacy).command == StoreCommand::set);
  StoreRequest r = complete(Msg(LegacyOp::compare_set).str("/k").str("a").str("b"), legacy);
  CHECK(r.command == StoreCommand::compare_set);
  CHECK(r.values == std::vector<std::string>{"a", "b"});
  CHECK(complete(Msg(LegacyOp::get).str("/k"), legacy).command == StoreCommand::get);
  r = complete(Msg(LegacyOp::add).str("/c").i64(5), legacy);
  CHECK(r.command == StoreCommand::add);
  CHECK(r.delta == 5);
  CHECK(complete(Msg(LegacyOp::check).keys({"/a"}), legacy).command == StoreCommand::check);
  CHECK(complete(Msg(LegacyOp::wait).keys({"/a"}), legacy).command == StoreCommand::wait);
  CHECK(complete(Msg(LegacyOp::get_num_keys), legacy).command == StoreCommand::get_num_keys);
  CHECK(complete(Msg(LegacyOp::watch_key).str("/k"), legacy).command == StoreCommand::watch_key);
  CHECK(complete(Msg(LegacyOp::delete_key).str("/k"), legacy).command == StoreCommand::delete_key);

  // APPEND and later exist only in the modern table.
  RequestParse p = parse_bytes(Msg(9).str("/k").str("v"), legacy);
  CHECK(p.status == ParseStatus::error);
  CHECK_THAT(p.error, Catch::Contains("legacy"));
}

TEST_CASE("store request: partial input asks for more, never past the request") {
  std::string whole = Msg(Op::multi_set).u64(2).str("/a").str("one").str("/bb").str("two");
  for (size_t n = 0; n < whole.size(); ++n) {
    RequestParse p = parse_bytes(whole.substr(0, n), OpTable::modern);
    INFO("prefix " << n);
    REQUIRE(p.status == ParseStatus::need_more);
    CHECK(p.needed > n);
    CHECK(p.needed <= whole.size());
  }
  CHECK(parse_bytes(whole, OpTable::modern).status == ParseStatus::complete);

  // A large value's length is known early: the hint jumps straight to its end.
  std::string big = Msg(Op::set).str("/k").str(std::string(100000, 'x'));
  RequestParse p = parse_bytes(big.substr(0, 30), OpTable::modern);
  CHECK(p.needed == big.size());
}

TEST_CASE("store request: pipelined requests are taken one at a time") {
  std::string first = Msg(Op::add).str("/c").i64(1);
  std::string both = first + std::string(Msg(Op::get).str("/c"));
  RequestParse p = parse_bytes(both, OpTable::modern);
  REQUIRE(p.status == ParseStatus::complete);
  CHECK(p.consumed == first.size());
  CHECK(p.request.command == StoreCommand::add);
  p = parse_bytes(both.substr(first.size()), OpTable::modern);
  CHECK(p.request.command == StoreCommand::get);
}

TEST_CASE("store request: limits fail as soon as the length arrives") {
  auto modern = OpTable::modern;
  uint8_t set = static_cast<uint8_t>(Op::set);
  // At the limit: still waiting for the bytes.
  CHECK(parse_bytes(header_only(set, wire::kMaxKeyBytes), modern).status == ParseStatus::need_more);
  RequestParse p = parse_bytes(header_only(set, wire::kMaxKeyBytes + 1), modern);
  CHECK(p.status == ParseStatus::error);
  CHECK_THAT(p.error, Catch::Contains("key of 8193 bytes"));

  std::string value_header = Msg(Op::set).str("/k").u64(wire::kMaxValueBytes);
  CHECK(parse_bytes(value_header, modern).status == ParseStatus::need_more);
  value_header = Msg(Op::set).str("/k").u64(wire::kMaxValueBytes + 1);
  CHECK(parse_bytes(value_header, modern).status == ParseStatus::error);

  // Lengths near 2^64 must not wrap any arithmetic.
  CHECK(parse_bytes(header_only(set, UINT64_MAX), modern).status == ParseStatus::error);
  CHECK(parse_bytes(Msg(Op::set).str("/k").u64(UINT64_MAX - 3), modern).status == ParseStatus::error);

  for (Op op : {Op::check, Op::wait, Op::multi_get, Op::multi_set}) {
    uint8_t code = static_cast<uint8_t>(op);
    CHECK(parse_bytes(header_only(code, wire::kMaxKeysPerOp), modern).status == ParseStatus::need_more);
    p = parse_bytes(header_only(code, wire::kMaxKeysPerOp + 1), modern);
    CHECK(p.status == ParseStatus::error);
    CHECK_THAT(p.error, Catch::Contains("131073 keys"));
    CHECK(parse_bytes(header_only(code, UINT64_MAX), modern).status == ParseStatus::error);
  }
  uint8_t legacy_wait = static_cast<uint8_t>(LegacyOp::wait);
  CHECK(parse_bytes(header_only(legacy_wait, wire::kMaxKeysPerOp + 1), OpTable::legacy).status ==
        ParseStatus::error);
}

TEST_CASE("store request: one request may not exceed the total limit") {
  // Eight values at the per-value limit are legal one by one, not together.
  Msg m(Op::multi_set);
  m.u64(8);
  std::string value(wire::kMaxValueBytes, 'v');
  for (int i = 0; i < 8; ++i) m.str("/k").str(value);
  RequestParse p = parse_bytes(m, OpTable::modern);
  CHECK(p.status == ParseStatus::error);
  // The message names the limit and how large the request is known to be.
  CHECK_THAT(p.error, Catch::Contains("MULTI_SET: request of at least "));
  CHECK_THAT(p.error, Catch::Contains("exceeds the limit of 67108864 bytes"));
}

TEST_CASE("store request: a server may set its own value limit") {
  const OpTable modern = OpTable::modern;
  auto with_limit = [](size_t limit, const std::string& bytes, OpTable table = OpTable::modern) {
    return parse_request(bytes, table, RequestLimits{limit});
  };
  CHECK(with_limit(16, Msg(Op::set).str("/k").str(std::string(16, 'v'))).status == ParseStatus::complete);
  RequestParse p = with_limit(16, Msg(Op::set).str("/k").u64(17));  // refused from the length alone
  CHECK(p.status == ParseStatus::error);
  CHECK(p.error == "SET: value of 17 bytes exceeds the limit of 16 bytes");
  // Every value field: COMPARE_SET's two, MULTI_SET's, APPEND, QUEUE_PUSH.
  CHECK(with_limit(16, Msg(Op::compare_set).str("/k").str("").u64(17)).status == ParseStatus::error);
  CHECK(with_limit(16, Msg(Op::multi_set).u64(2).str("/a").str("1").str("/b").u64(17)).status ==
        ParseStatus::error);
  CHECK(with_limit(16, Msg(Op::append).str("/k").u64(17)).status == ParseStatus::error);
  CHECK(with_limit(16, Msg(Op::queue_push).str("/q").u64(17)).status == ParseStatus::error);
  CHECK(with_limit(16, Msg(LegacyOp::set).str("/k").u64(17), OpTable::legacy).status == ParseStatus::error);

  // Raised past torch's 8 MiB: a 9 MiB value is only waited for.
  const size_t nine_mib = 9 * 1024 * 1024;
  std::string nine = Msg(Op::set).str("/k").u64(nine_mib);
  CHECK(parse_bytes(nine, modern).status == ParseStatus::error);
  p = with_limit(16 * 1024 * 1024, nine);
  CHECK(p.status == ParseStatus::need_more);
  CHECK(p.needed == nine.size() + nine_mib);
  // The keys keep theirs.
  CHECK(with_limit(16 * 1024 * 1024, Msg(Op::set).u64(wire::kMaxKeyBytes + 1)).status == ParseStatus::error);
}

TEST_CASE("store request: garbage never reads out of bounds or loops") {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_int_distribution<int> length(0, 64);
  for (int round = 0; round < 20000; ++round) {
    std::string junk(length(rng), '\0');
    for (char& c : junk) c = static_cast<char>(byte(rng));
    // Small opcodes reach the field parsers more often than pure noise would.
    if (!junk.empty() && round % 2 == 0) junk[0] = static_cast<char>(byte(rng) % 18);
    for (OpTable table : {OpTable::unknown, OpTable::modern, OpTable::legacy}) {
      std::string_view rest = junk;
      while (true) {
        RequestParse p = parse_request(rest, table);
        table = p.table;
        if (p.status == ParseStatus::need_more) {
          REQUIRE(p.needed > rest.size());
          REQUIRE(p.needed <= wire::kMaxRequestBytes);
          break;
        }
        if (p.status == ParseStatus::error) {
          REQUIRE_FALSE(p.error.empty());
          break;
        }
        REQUIRE(p.consumed > 0);
        REQUIRE(p.consumed <= rest.size());
        rest.remove_prefix(p.consumed);
      }
    }
  }
}
