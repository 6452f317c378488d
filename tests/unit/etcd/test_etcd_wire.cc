// etcd's messages (etcd/wire.h) against golden bytes: each hex literal is
// the message serialized by Google's protobuf (python3-protobuf 4.21, from
// etcd's field numbers), printed by tests/unit/etcd/etcd_wire_golden.py under
// the name in the comment beside it. So the tests check etcd's wire format,
// not the code against itself.
#include <catch2/catch.hpp>

#include "etcd/hex.h"
#include "etcd/wire.h"

using namespace cxxrun::etcd;
using etcd_hex::hex;
using etcd_hex::unhex;

namespace {

const std::string kBig = "13049071153751544597";  // a member id beyond int64

}  // namespace

TEST_CASE("etcd wire: requests leave defaults out; keys are any bytes") {
  CHECK(hex(wire::put_request("/a", std::string("v\0w", 3), 7)) == "0a022f6112037600771807");  // put /a
  CHECK(hex(wire::put_request("k", "", 0)) == "0a016b");                                     // put k empty
  // A key with NUL and 0xff, and a negative int64: ten bytes of varint.
  CHECK(hex(wire::put_request(std::string("k\0\xff", 3), "\xff", -1)) ==
        "0a036b00ff1201ff18ffffffffffffffffff01");  // put NUL ff lease -1
  CHECK(hex(wire::range_request("a", "b")) == "0a0161120162");  // range a b
  CHECK(hex(wire::range_request("a", "")) == "0a0161");         // range a
  CHECK(hex(wire::delete_request("k", "")) == "0a016b");        // delete k
  CHECK(hex(wire::delete_request(std::string(1, '\0'), std::string(1, '\0'))) == "0a0100120100");  // delete all
  CHECK(hex(wire::lease_grant_request(5)) == "0805");                   // lease grant 5
  CHECK(hex(wire::lease_id_request(-3)) == "08fdffffffffffffffff01");   // lease id -3
  CHECK(hex(wire::lease_id_request(77)) == "084d");                     // lease id 77
  CHECK(hex(wire::authenticate_request("u", "p")) == "0a0175120170");  // authenticate
}

TEST_CASE("etcd wire: range shapes, a point in history, a page") {
  CHECK(hex(wire::range_request("a", "b", wire::RangeShape::count_only)) == "0a01611201624801");  // range count_only
  CHECK(hex(wire::range_request("a", "b", wire::RangeShape::keys_only)) == "0a01611201624001");   // range keys_only
  CHECK(hex(wire::range_at_request("k", 9)) == "0a016b2009");                                     // range at 9
  CHECK(hex(wire::range_page_request("a", "b", 2048, 0)) == "0a0161120162188010");                // range page
  CHECK(hex(wire::range_page_request("a", "b", 2048, 17)) == "0a01611201621880102011");  // range page at 17
}

TEST_CASE("etcd wire: a watch is created with progress notifications") {
  CHECK(hex(wire::watch_create_request("p", "q", 0)) == "0a080a01701201712001");  // watch p q
  CHECK(hex(wire::watch_create_request("p", "", 12)) == "0a070a0170180c2001");    // watch p 12
  CHECK(hex(wire::watch_create_request("p", "", 0, true)) == "0a070a017020013001");  // watch p --prev-kv
}

TEST_CASE("etcd wire: a transaction's compares and operations") {
  // Every compare target and result; a compare's target is a oneof, so
  // create_revision 0 ("absent") and an empty value are written, not left out.
  auto txn = wire::txn_request(
      {Compare::value_is("k", Compare::Result::equal, "v"),
       Compare::create_revision_is("k", Compare::Result::less, 3),
       Compare::version_is("k", Compare::Result::greater, 1),
       Compare::mod_revision_is("k", Compare::Result::not_equal, 9),
       Compare::create_revision_is("n", Compare::Result::equal, 0), Compare::value_is("e", Compare::Result::equal, "")},
      {Op::put("k", "n", 4), Op::get_prefix("p/")}, {Op::del("k"), Op::del_prefix("")});
  CHECK(hex(txn) ==  // txn
        "0a0810031a016b3a01760a09080210011a016b28030a0708011a016b20010a09080310021a016b30090a0710011a016e2800"
        "0a0710031a01653a00120a12080a016b12016e1804120a0a080a02702f120270301a051a030a016b1a081a060a0100120100");
  // An operation is a oneof too: a put of nothing is still a put.
  CHECK(hex(wire::txn_request({}, {Op::put("k", "")}, {})) == "120512030a016b");  // txn put empty
}

TEST_CASE("etcd wire: a transaction inside a transaction") {
  auto txn = wire::txn_request(
      {Compare::version_is("c", Compare::Result::equal, 2)},
      {Op::put("c", "3"), Op::txn({Compare::mod_revision_is("r", Compare::Result::equal, 3)}, {Op::put("r", "4")},
                                  {Op::get("r")})},
      {});
  CHECK(hex(txn) ==  // txn nested
        "0a051a01632002120812060a0163120133121c221a0a0710021a01723003120812060a01721201341a050a030a0172");
}

TEST_CASE("etcd wire: prefix range ends") {
  CHECK(prefix_range_end("a/") == "a0");
  CHECK(prefix_range_end("ab") == "ac");
  CHECK(prefix_range_end(std::string("a\xff", 2)) == "b");
  CHECK(prefix_range_end(std::string("\xff\xff", 2)) == std::string(1, '\0'));
  CHECK(prefix_range_end("") == std::string(1, '\0'));
}

TEST_CASE("etcd wire: a range answer, its keys and its header") {
  const auto full = unhex("0a1108011095a6a181bda2e78bb501182a200212120a03666f6f1002182820032a0362617230072001");
  auto r = wire::parse_get(full);  // range full
  CHECK(r.revision == 42);
  REQUIRE(r.kv);
  CHECK(r.kv->key == "foo");
  CHECK(r.kv->value == "bar");
  CHECK(r.kv->create_revision == 2);
  CHECK(r.kv->mod_revision == 40);
  CHECK(r.kv->version == 3);
  CHECK(r.kv->lease == 7);
  CHECK(wire::parse_member_id(full) == kBig);
  CHECK(wire::parse_raft_term(full) == 2);

  auto absent = wire::parse_get(unhex("0a021805"));  // range absent
  CHECK(absent.revision == 5);
  CHECK_FALSE(absent.kv);
  CHECK(wire::parse_member_id(unhex("0a021805")).empty());
  CHECK(wire::parse_raft_term(unhex("0a021805")) == 0);

  // Two keys, one with NUL and 0xff and no value, one whose value is NUL.
  // range page more
  auto page = wire::parse_range(unhex("0a021805120b0a036100ff10011801200112060a01622a010018012003"));
  CHECK(page.revision == 5);
  CHECK(page.more);
  REQUIRE(page.kvs.size() == 2);
  CHECK(page.kvs[0].key == std::string("a\0\xff", 3));
  CHECK(page.kvs[0].value.empty());
  CHECK(page.kvs[0].version == 1);
  CHECK(page.kvs[1].key == "b");
  CHECK(page.kvs[1].value == std::string(1, '\0'));
  CHECK_FALSE(wire::parse_range(full).more);
}

TEST_CASE("etcd wire: a count") {
  auto counted = wire::parse_count(unhex("0a02182920e807"));  // count
  CHECK(counted.revision == 41);
  CHECK(counted.count == 1000);
  CHECK(wire::parse_count(unhex("0a021805")).count == 0);  // range absent: proto3 leaves a zero count out
}

TEST_CASE("etcd wire: fields a newer etcd might add are skipped") {
  // range future: a string, a fixed64, a fixed32, a message and a sint64
  // unknown at the top level, and a string unknown in the header.
  const auto future = unhex("0a07100218062a017a12060a016b2a017620017a016e810108070605040302018d01090000009201021863"
                            "980103");
  auto r = wire::parse_range(future);
  CHECK(r.revision == 6);
  REQUIRE(r.kvs.size() == 1);
  CHECK(r.kvs[0].key == "k");
  CHECK(r.kvs[0].value == "v");
  CHECK(wire::parse_count(future).count == 1);
  CHECK(wire::parse_member_id(future) == "2");
}

TEST_CASE("etcd wire: put, delete, lease, auth and status answers") {
  const auto put = unhex("0a09080110de0118092003");  // put
  CHECK(wire::parse_revision(put) == 9);
  CHECK(wire::parse_member_id(put) == "222");
  CHECK(wire::parse_raft_term(put) == 3);
  CHECK(wire::parse_deleted(unhex("0a0218091003")) == 3);  // delete
  CHECK(wire::parse_deleted(put) == 0);
  auto lease = wire::parse_lease_grant(unhex("0a00108896909888c1e88a531805"));  // lease grant
  CHECK(lease.id == 5986869437100460808);
  CHECK(lease.ttl == 5);
  CHECK_THROWS_WITH(wire::parse_lease_grant(unhex("100122106c6573736f723a206e6f207370616365")),  // lease grant error
                    Catch::Contains("lessor: no space"));
  CHECK(wire::parse_keep_alive(unhex("0a02180310011805")) == 5);  // keep alive
  CHECK(wire::parse_keep_alive(unhex("0a0218031001")) == 0);      // keep alive gone
  CHECK(wire::parse_keep_alive(unhex("1801")) == 1);
  CHECK(wire::parse_keep_alive(unhex("18ffffffffffffffffff01")) == 0);  // TTL -1
  CHECK(wire::parse_token(unhex("0a0012066162632e3132")) == "abc.12");  // token
  CHECK_THROWS_AS(wire::parse_token(unhex("0a00")), wire::Malformed);
  const auto status = unhex("0a09080110de01180520031205332e352e392095a6a181bda2e78bb5013003");  // status
  CHECK(wire::parse_status_leader(status) == kBig);
  CHECK(wire::parse_member_id(status) == "222");
  CHECK(wire::parse_raft_term(status) == 3);
  CHECK(wire::parse_status_leader(unhex("0a0310de011205332e352e39")).empty());  // status no leader
}

TEST_CASE("etcd wire: transaction answers") {
  auto t = wire::parse_txn(unhex("0a02180410011a120a100a02180312080a016b18032a017620011a0612040a0218041a081a060a"
                                 "02180410011a0c220a0a02180410011a021200"));  // txn
  CHECK(t.succeeded);
  CHECK(t.revision == 4);
  REQUIRE(t.responses.size() == 4);
  CHECK(t.responses[0].kind == Op::Kind::range);
  CHECK(t.responses[0].revision == 3);
  REQUIRE(t.responses[0].kvs.size() == 1);
  CHECK(t.responses[0].kvs[0].value == "v");
  CHECK(t.responses[0].kvs[0].mod_revision == 3);
  CHECK(t.responses[1].kind == Op::Kind::put);
  CHECK(t.responses[1].revision == 4);
  CHECK(t.responses[2].kind == Op::Kind::delete_range);
  CHECK(t.responses[2].deleted == 1);
  CHECK(t.responses[3].kind == Op::Kind::txn);
  CHECK(t.responses[3].succeeded);
  CHECK(t.responses[3].revision == 4);
  // succeeded false is left out; an empty range answer is still a range's.
  auto f = wire::parse_txn(unhex("0a0218041a020a00"));  // txn failed
  CHECK_FALSE(f.succeeded);
  CHECK(f.revision == 4);
  REQUIRE(f.responses.size() == 1);
  CHECK(f.responses[0].kind == Op::Kind::range);
  CHECK(f.responses[0].kvs.empty());
  // A response of a kind this client never asks for (field 5).
  CHECK_THROWS_AS(wire::parse_txn(unhex("1a022a00")), wire::Malformed);
}

TEST_CASE("etcd wire: watch messages") {
  using Kind = wire::WatchMessage::Kind;
  auto created = wire::parse_watch_message(unhex("0a0218041801"));  // watch created
  CHECK(created.kind == Kind::created);
  CHECK(created.revision == 4);
  auto events = wire::parse_watch_message(
      unhex("0a02180710015a0e120c0a01611005180520012a01315a09080112050a01621806"));  // watch events
  CHECK(events.kind == Kind::events);
  CHECK(events.revision == 7);
  REQUIRE(events.events.size() == 2);
  CHECK(events.events[0].type == WatchEvent::Type::put);
  CHECK(events.events[0].kv.key == "a");
  CHECK(events.events[0].kv.value == "1");
  CHECK(events.events[0].kv.mod_revision == 5);
  CHECK(events.events[1].type == WatchEvent::Type::del);
  CHECK(events.events[1].kv.key == "b");
  CHECK(events.events[1].kv.mod_revision == 6);
  CHECK_FALSE(events.events[1].prev);
  // A DELETE with the key as it was (a watch with prev_kv).
  auto with_prev = wire::parse_watch_message(unhex("0a0218075a10080112050a016218061a050a01621003"));
  REQUIRE(with_prev.events.size() == 1);
  REQUIRE(with_prev.events[0].prev);
  CHECK(with_prev.events[0].prev->key == "b");
  CHECK(with_prev.events[0].prev->create_revision == 3);
  auto compacted = wire::parse_watch_message(
      unhex("0a02200220012805322a6d7663633a207265717569726564207265766973696f6e20686173206265656e20636f6d70616374"
            "6564"));  // watch compacted
  CHECK(compacted.kind == Kind::canceled);
  CHECK(compacted.compact_revision == 5);
  CHECK(compacted.cancel_reason == "mvcc: required revision has been compacted");
  auto progress = wire::parse_watch_message(unhex("0a021809"));  // watch progress
  CHECK(progress.kind == Kind::progress);
  CHECK(progress.revision == 9);
  // An event type etcd does not have (2).
  CHECK_THROWS_AS(wire::parse_watch_message(unhex("5a020802")), wire::Malformed);
}

TEST_CASE("etcd wire: answers that do not parse") {
  const char* const bad[] = {
      "0a0218",                      // the header's length runs past the end
      "0a021880",                    // a varint cut short inside the header
      "0805",                        // the header (field 1) as a varint
      "12020801",                    // a key (field 1 of a KeyValue) as a varint
      "20ffffffffffffffffffff01",    // an 11-byte varint
      "20ffffffffffffffffff02",      // a 10-byte varint beyond 64 bits
      "0000",                        // field number 0
      "0b",                          // a group (wire type 3)
      "0f",                          // wire type 7
      "2901020304",                  // a fixed64 (unknown field 5) cut short
      "18",                          // a tag and nothing after it
  };
  for (const char* b : bad) {
    INFO(b);
    CHECK_THROWS_AS(wire::parse_get(unhex(b)), wire::Malformed);
    CHECK_THROWS_AS(wire::parse_txn(unhex(b)), wire::Malformed);
    // The cheap header reads never throw: the full parse says what is wrong.
    CHECK_NOTHROW(wire::parse_member_id(unhex(b)));
    CHECK_NOTHROW(wire::parse_raft_term(unhex(b)));
  }
  // Text is not a message either ('{' is field 15, wire type 3).
  CHECK_THROWS_AS(wire::parse_range(R"({"header":{}})"), wire::Malformed);
  CHECK_THROWS_AS(wire::parse_watch_message(unhex("0a0218")), wire::Malformed);
  CHECK_THROWS_AS(wire::parse_status_leader(unhex("220100")), wire::Malformed);  // the leader as bytes
}
