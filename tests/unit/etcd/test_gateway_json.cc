// The gateway's JSON translated to and from etcd's gRPC messages
// (gateway_json.h), which the unit tests use to script the fake member in
// JSON. Each case is a message serialized by Google's protobuf and its
// proto3 JSON (json_format with the .proto's field names), both printed by
// tests/unit/etcd/etcd_wire_golden.py under the case's name.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "etcd/gateway_json.h"
#include "etcd/hex.h"
#include "etcd/wire.h"

using namespace etcd_gateway;
using etcd_hex::hex;
using etcd_hex::unhex;
using json = nlohmann::json;
namespace wire = cxxrun::etcd::wire;

namespace {

struct Golden {
  const char* name;
  const char* method;
  const char* bytes;  // hex
  const char* json;
};

const Golden kRequests[] = {
    {"put /a", "/etcdserverpb.KV/Put",
     "0a022f6112037600771807",
     R"({"key":"L2E=","value":"dgB3","lease":"7"})"},
    {"put k empty", "/etcdserverpb.KV/Put",
     "0a016b",
     R"({"key":"aw=="})"},
    {"put NUL ff lease -1", "/etcdserverpb.KV/Put",
     "0a036b00ff1201ff18ffffffffffffffffff01",
     R"({"key":"awD/","value":"/w==","lease":"-1"})"},
    {"range a b", "/etcdserverpb.KV/Range",
     "0a0161120162",
     R"({"key":"YQ==","range_end":"Yg=="})"},
    {"range a", "/etcdserverpb.KV/Range",
     "0a0161",
     R"({"key":"YQ=="})"},
    {"range count_only", "/etcdserverpb.KV/Range",
     "0a01611201624801",
     R"({"key":"YQ==","range_end":"Yg==","count_only":true})"},
    {"range keys_only", "/etcdserverpb.KV/Range",
     "0a01611201624001",
     R"({"key":"YQ==","range_end":"Yg==","keys_only":true})"},
    {"range at 9", "/etcdserverpb.KV/Range",
     "0a016b2009",
     R"({"key":"aw==","revision":"9"})"},
    {"range page", "/etcdserverpb.KV/Range",
     "0a0161120162188010",
     R"({"key":"YQ==","range_end":"Yg==","limit":"2048"})"},
    {"range page at 17", "/etcdserverpb.KV/Range",
     "0a01611201621880102011",
     R"({"key":"YQ==","range_end":"Yg==","limit":"2048","revision":"17"})"},
    {"delete k", "/etcdserverpb.KV/DeleteRange",
     "0a016b",
     R"({"key":"aw=="})"},
    {"delete all", "/etcdserverpb.KV/DeleteRange",
     "0a0100120100",
     R"({"key":"AA==","range_end":"AA=="})"},
    {"txn", "/etcdserverpb.KV/Txn",
     "0a0810031a016b3a01760a09080210011a016b28030a0708011a016b20010a09080310021a016b30090a0710011a016e2800"
     "0a0710031a01653a00120a12080a016b12016e1804120a0a080a02702f120270301a051a030a016b1a081a060a0100120100",
     R"({"compare":[{"target":"VALUE","key":"aw==","value":"dg=="},{"result":"LESS","target":"CREATE","key":)"
     R"("aw==","create_revision":"3"},{"result":"GREATER","key":"aw==","version":"1"},{"result":"NOT_EQUAL",)"
     R"("target":"MOD","key":"aw==","mod_revision":"9"},{"target":"CREATE","key":"bg==","create_revision":"0)"
     R"("},{"target":"VALUE","key":"ZQ==","value":""}],"success":[{"request_put":{"key":"aw==","value":"bg==)"
     R"(","lease":"4"}},{"request_range":{"key":"cC8=","range_end":"cDA="}}],"failure":[{"request_delete_ran)"
     R"(ge":{"key":"aw=="}},{"request_delete_range":{"key":"AA==","range_end":"AA=="}}]})"},
    {"txn nested", "/etcdserverpb.KV/Txn",
     "0a051a01632002120812060a0163120133121c221a0a0710021a01723003120812060a01721201341a050a030a0172",
     R"({"compare":[{"key":"Yw==","version":"2"}],"success":[{"request_put":{"key":"Yw==","value":"Mw=="}},{)"
     R"("request_txn":{"compare":[{"target":"MOD","key":"cg==","mod_revision":"3"}],"success":[{"request_put)"
     R"(":{"key":"cg==","value":"NA=="}}],"failure":[{"request_range":{"key":"cg=="}}]}}]})"},
    {"txn put empty", "/etcdserverpb.KV/Txn",
     "120512030a016b",
     R"({"success":[{"request_put":{"key":"aw=="}}]})"},
    {"lease grant 5", "/etcdserverpb.Lease/LeaseGrant",
     "0805",
     R"({"TTL":"5"})"},
    {"lease id -3", "/etcdserverpb.Lease/LeaseKeepAlive",
     "08fdffffffffffffffff01",
     R"({"ID":"-3"})"},
    {"lease id 77", "/etcdserverpb.Lease/LeaseRevoke",
     "084d",
     R"({"ID":"77"})"},
    {"authenticate", "/etcdserverpb.Auth/Authenticate",
     "0a0175120170",
     R"({"name":"u","password":"p"})"},
    {"watch p q", "/etcdserverpb.Watch/Watch",
     "0a080a01701201712001",
     R"({"create_request":{"key":"cA==","range_end":"cQ==","progress_notify":true}})"},
    {"watch p 12", "/etcdserverpb.Watch/Watch",
     "0a070a0170180c2001",
     R"({"create_request":{"key":"cA==","start_revision":"12","progress_notify":true}})"},
};

const Golden kResponses[] = {
    {"range full", "/etcdserverpb.KV/Range",
     "0a1108011095a6a181bda2e78bb501182a200212120a03666f6f1002182820032a0362617230072001",
     R"({"header":{"cluster_id":"1","member_id":"13049071153751544597","revision":"42","raft_term":"2"},"kvs)"
     R"(":[{"key":"Zm9v","create_revision":"2","mod_revision":"40","version":"3","value":"YmFy","lease":"7"})"
     R"(],"count":"1"})"},
    {"range absent", "/etcdserverpb.KV/Range",
     "0a021805",
     R"({"header":{"revision":"5"}})"},
    {"range page more", "/etcdserverpb.KV/Range",
     "0a021805120b0a036100ff10011801200112060a01622a010018012003",
     R"({"header":{"revision":"5"},"kvs":[{"key":"YQD/","create_revision":"1","mod_revision":"1","version":")"
     R"(1"},{"key":"Yg==","value":"AA=="}],"more":true,"count":"3"})"},
    {"count", "/etcdserverpb.KV/Range",
     "0a02182920e807",
     R"({"header":{"revision":"41"},"count":"1000"})"},
    {"put", "/etcdserverpb.KV/Put",
     "0a09080110de0118092003",
     R"({"header":{"cluster_id":"1","member_id":"222","revision":"9","raft_term":"3"}})"},
    {"delete", "/etcdserverpb.KV/DeleteRange",
     "0a0218091003",
     R"({"header":{"revision":"9"},"deleted":"3"})"},
    {"txn", "/etcdserverpb.KV/Txn",
     "0a02180410011a120a100a02180312080a016b18032a017620011a0612040a0218041a081a060a02180410011a0c220a0a02"
     "180410011a021200",
     R"({"header":{"revision":"4"},"succeeded":true,"responses":[{"response_range":{"header":{"revision":"3")"
     R"(},"kvs":[{"key":"aw==","mod_revision":"3","value":"dg=="}],"count":"1"}},{"response_put":{"header":{)"
     R"("revision":"4"}}},{"response_delete_range":{"header":{"revision":"4"},"deleted":"1"}},{"response_txn)"
     R"(":{"header":{"revision":"4"},"succeeded":true,"responses":[{"response_put":{}}]}}]})"},
    {"txn failed", "/etcdserverpb.KV/Txn",
     "0a0218041a020a00",
     R"({"header":{"revision":"4"},"responses":[{"response_range":{}}]})"},
    {"lease grant", "/etcdserverpb.Lease/LeaseGrant",
     "0a00108896909888c1e88a531805",
     R"({"header":{},"ID":"5986869437100460808","TTL":"5"})"},
    {"lease grant error", "/etcdserverpb.Lease/LeaseGrant",
     "100122106c6573736f723a206e6f207370616365",
     R"({"ID":"1","error":"lessor: no space"})"},
    {"keep alive", "/etcdserverpb.Lease/LeaseKeepAlive",
     "0a02180310011805",
     R"({"header":{"revision":"3"},"ID":"1","TTL":"5"})"},
    {"keep alive gone", "/etcdserverpb.Lease/LeaseKeepAlive",
     "0a0218031001",
     R"({"header":{"revision":"3"},"ID":"1"})"},
    {"token", "/etcdserverpb.Auth/Authenticate",
     "0a0012066162632e3132",
     R"({"header":{},"token":"abc.12"})"},
    {"status", "/etcdserverpb.Maintenance/Status",
     "0a09080110de01180520031205332e352e392095a6a181bda2e78bb5013003",
     R"({"header":{"cluster_id":"1","member_id":"222","revision":"5","raft_term":"3"},"version":"3.5.9","lea)"
     R"(der":"13049071153751544597","raftTerm":"3"})"},
    {"status no leader", "/etcdserverpb.Maintenance/Status",
     "0a0310de011205332e352e39",
     R"({"header":{"member_id":"222"},"version":"3.5.9"})"},
    {"watch created", "/etcdserverpb.Watch/Watch",
     "0a0218041801",
     R"({"header":{"revision":"4"},"created":true})"},
    {"watch events", "/etcdserverpb.Watch/Watch",
     "0a02180710015a0e120c0a01611005180520012a01315a09080112050a01621806",
     R"({"header":{"revision":"7"},"watch_id":"1","events":[{"kv":{"key":"YQ==","create_revision":"5","mod_r)"
     R"(evision":"5","version":"1","value":"MQ=="}},{"type":"DELETE","kv":{"key":"Yg==","mod_revision":"6"}})"
     R"(]})"},
    {"watch compacted", "/etcdserverpb.Watch/Watch",
     "0a02200220012805322a6d7663633a207265717569726564207265766973696f6e20686173206265656e20636f6d70616374"
     "6564",
     R"({"header":{"raft_term":"2"},"canceled":true,"compact_revision":"5","cancel_reason":"mvcc: required r)"
     R"(evision has been compacted"})"},
    {"watch progress", "/etcdserverpb.Watch/Watch",
     "0a021809",
     R"({"header":{"revision":"9"}})"},
};

}  // namespace

TEST_CASE("gateway json: requests as the gateway showed them, and back") {
  for (const auto& g : kRequests) {
    INFO(g.name);
    CHECK(json::parse(request_json(g.method, unhex(g.bytes))) == json::parse(g.json));
    CHECK(hex(request_proto(g.method, g.json)) == g.bytes);
  }
}

TEST_CASE("gateway json: answers from the gateway's JSON, and back") {
  for (const auto& g : kResponses) {
    INFO(g.name);
    CHECK(hex(response_proto(g.method, g.json)) == g.bytes);
    CHECK(json::parse(response_json(g.method, unhex(g.bytes))) == json::parse(g.json));
  }
}

TEST_CASE("gateway json: what the client sends reads as the tests expect") {
  // Compact, keys sorted, int64s as strings: the tests look for substrings.
  CHECK(request_json("/etcdserverpb.KV/Range", wire::range_page_request("/p/", "/p0", 100, 9)) ==
        R"({"key":"L3Av","limit":"100","range_end":"L3Aw","revision":"9"})");
  CHECK(request_json("/etcdserverpb.KV/Put", wire::put_request("k", "v", 77)) ==
        R"({"key":"aw==","lease":"77","value":"dg=="})");
  CHECK(request_json("/etcdserverpb.Maintenance/Status", "") == "{}");
  CHECK(request_json("/etcdserverpb.Lease/LeaseRevoke", wire::lease_id_request(5)) == R"({"ID":"5"})");
}

TEST_CASE("gateway json: the tests' own answers, as they write them") {
  // int64s as numbers, an empty value written out, the stream's wrapping.
  auto r = wire::parse_get(response_proto(
      "/etcdserverpb.KV/Range",
      R"({"header":{"cluster_id":"1","member_id":"222","revision":5},"kvs":[{"key":"aw==","value":"",)"
      R"("mod_revision":40}],"count":"1"})"));
  CHECK(r.revision == 5);
  REQUIRE(r.kv);
  CHECK(r.kv->key == "k");
  CHECK(r.kv->value.empty());
  CHECK(r.kv->mod_revision == 40);
  const std::string keep_alive = R"({"header":{"revision":"3"},"ID":"1","TTL":"5"})";
  CHECK(hex(response_proto("/etcdserverpb.Lease/LeaseKeepAlive", R"({"result":)" + keep_alive + "}")) ==
        "0a02180310011805");  // keep alive
  CHECK(hex(response_proto("/etcdserverpb.Watch/Watch", R"({"result":{"header":{"revision":"4"},"created":true}})")) ==
        "0a0218041801");  // watch created
  // Only a stream's answers come wrapped.
  CHECK_THROWS_AS(response_proto("/etcdserverpb.KV/Put", R"({"result":{"header":{}}})"), std::invalid_argument);
  // Enums by number too.
  CHECK(hex(response_proto("/etcdserverpb.Watch/Watch", R"({"events":[{"type":1}]})")) == "5a020801");
}

TEST_CASE("gateway json: the gateway's paths") {
  const std::pair<const char*, const char*> paths[] = {
      {"/etcdserverpb.KV/Range", "/v3/kv/range"},
      {"/etcdserverpb.KV/Put", "/v3/kv/put"},
      {"/etcdserverpb.KV/DeleteRange", "/v3/kv/deleterange"},
      {"/etcdserverpb.KV/Txn", "/v3/kv/txn"},
      {"/etcdserverpb.Lease/LeaseGrant", "/v3/lease/grant"},
      {"/etcdserverpb.Lease/LeaseKeepAlive", "/v3/lease/keepalive"},
      {"/etcdserverpb.Lease/LeaseRevoke", "/v3/lease/revoke"},
      {"/etcdserverpb.Watch/Watch", "/v3/watch"},
      {"/etcdserverpb.Auth/Authenticate", "/v3/auth/authenticate"},
      {"/etcdserverpb.Maintenance/Status", "/v3/maintenance/status"},
  };
  for (auto [method, path] : paths) CHECK(gateway_path(method) == path);
  CHECK_THROWS_AS(gateway_path("/etcdserverpb.KV/Compact"), std::invalid_argument);
}

TEST_CASE("gateway json: refusals as the gateway wrote them") {
  auto unary = error_status(R"({"error":"etcdserver: no leader","message":"etcdserver: no leader","code":14})");
  REQUIRE(unary);
  CHECK(unary->code == 14);
  CHECK(unary->message == "etcdserver: no leader");
  auto streamed = error_status(
      R"({"error":{"grpc_code":16,"http_code":401,"message":"etcdserver: invalid auth token",)"
      R"("http_status":"Unauthorized"}})");
  REQUIRE(streamed);
  CHECK(streamed->code == 16);
  CHECK(streamed->message == "etcdserver: invalid auth token");
  CHECK_FALSE(error_status("Not Found"));
  CHECK_FALSE(error_status(R"({"header":{}})"));
  CHECK_FALSE(error_status(R"({"ID":"1","error":"lessor: no space"})"));  // a LeaseGrantResponse's own field
}

TEST_CASE("gateway json: what is not one of etcd's messages") {
  CHECK_THROWS_AS(response_proto("/etcdserverpb.KV/Range", R"({"header":{},"kv":[]})"), std::invalid_argument);
  CHECK_THROWS_AS(response_proto("/etcdserverpb.KV/Range", R"({"kvs":[{"key":"!!"}]})"), std::invalid_argument);
  CHECK_THROWS_AS(response_proto("/etcdserverpb.KV/Range", R"({"count":"many"})"), std::invalid_argument);
  CHECK_THROWS_AS(response_proto("/etcdserverpb.KV/Range", R"({"more":"yes"})"), std::invalid_argument);
  CHECK_THROWS_AS(response_proto("/etcdserverpb.KV/Range", R"({"kvs":{}})"), std::invalid_argument);
  CHECK_THROWS_AS(response_proto("/etcdserverpb.Watch/Watch", R"({"events":[{"type":"EXPIRE"}]})"),
                  std::invalid_argument);
  CHECK_THROWS_AS(response_proto("/etcdserverpb.KV/Range", "not json"), std::invalid_argument);
  // range future: fields the table does not have.
  CHECK_THROWS_AS(response_json("/etcdserverpb.KV/Range",
                                unhex("0a07100218062a017a12060a016b2a017620017a016e810108070605040302018d0109000000"
                                      "9201021863980103")),
                  std::invalid_argument);
  CHECK_THROWS_AS(request_json("/etcdserverpb.KV/Put", unhex("0a0218")), std::invalid_argument);  // cut short
  CHECK_THROWS_AS(request_json("/etcdserverpb.KV/Put", unhex("0801")), std::invalid_argument);    // key as a varint
}
