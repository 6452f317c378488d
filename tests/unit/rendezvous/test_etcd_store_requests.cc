// What the etcd rendezvous asks of etcd, against a fake member that counts
// requests and connections: every node makes these at once when a job
// re-forms, so a write where a read answers is N proposals through Raft,
// and a connection per component is N descriptors on the member.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

#include "etcd/base64.h"
#include "etcd/options.h"
#include "fake_etcd_member.h"
#include "rendezvous/etcd_endpoints.h"
#include "rendezvous/etcd_job_store.h"
#include "rendezvous/etcd_liveness.h"
#include "rendezvous/etcd_store.h"

using namespace cxxrun;
using namespace std::chrono_literals;
using EtcdMember = FakeEtcdMember;

namespace {

const std::string kRequestsHeader = R"("header":{"cluster_id":"1","member_id":"222","revision":"12"})";

std::string range_answer(const std::string& key, const std::string& value) {
  if (value.empty()) return EtcdMember::ok("{" + kRequestsHeader + R"(,"count":"0"})");
  return EtcdMember::ok("{" + kRequestsHeader + R"(,"kvs":[{"key":")" + etcd::base64_encode(key) +
                    R"(","create_revision":"3","mod_revision":"5","version":"2","value":")" +
                    etcd::base64_encode(value) + R"("}],"count":"1"})");
}

const std::string kTxnSucceeded = EtcdMember::ok("{" + kRequestsHeader + R"(,"succeeded":true,"responses":[{"response_put":{}}]})");

// An add's transaction, applied: the counter read back at `version`.
std::string add_applied(const std::string& counter, int version) {
  return EtcdMember::ok("{" + kRequestsHeader + R"(,"succeeded":true,"responses":[{"response_put":{}},)" +
                        R"({"response_range":{"kvs":[{"key":")" + etcd::base64_encode(counter) +
                        R"(","create_revision":"11","mod_revision":"12","version":")" + std::to_string(version) +
                        R"(","value":""}],"count":"1"}},{"response_put":{}},{"response_put":{}}]})");
}

// A join of round `round` (the algorithm's keys under "r<round>/").
store::StoreClient::Join join_of(int round, const std::string& record) {
  store::StoreClient::Join j;
  j.counter = "r" + std::to_string(round) + "/count";
  j.record_prefix = "r" + std::to_string(round) + "/node/";
  j.record = record;
  return j;
}

rendezvous::RendezvousSettings requests_settings_for(const EtcdMember& m) {
  rendezvous::RendezvousSettings s;
  s.etcd.endpoints = rendezvous::parse_etcd_endpoints({m.endpoint()}, false);
  s.etcd.prefix = "/p";
  s.keep_alive_interval = 1s;
  s.read_timeout = 5s;
  return s;
}

}  // namespace

// The members travel as rendezvous's own EtcdEndpoints (etcd is private to
// rendezvous/) and become etcd's only here: the client is told exactly
// those, not etcd's default member on this host besides.
TEST_CASE("etcd store: the client reaches exactly the members the settings name") {
  const auto members = rendezvous::parse_etcd_endpoints({"e1:2379,[::1]:23790", "e3"}, true);
  rendezvous::EtcdSettings s;
  s.endpoints = members;
  s.https = true;
  const etcd::Options o = rendezvous::etcd_options(s, 5s, 0);
  CHECK(o.endpoints == std::vector<etcd::Endpoint>{{"e1", 2379}, {"::1", 23790}, {"e3", 2379}});
  CHECK(o.protocol == etcd::Protocol::https);
  CHECK(o.timeout == 5s);
  CHECK(rendezvous::etcd_options({}, 5s).endpoints.empty());
  // A process starts at a member of its own and goes round from there: every
  // agent asking the first made it serve a whole job's re-join.
  CHECK(rendezvous::etcd_options(s, 5s, 4).endpoints == std::vector<etcd::Endpoint>{{"::1", 23790}, {"e3", 2379}, {"e1", 2379}});
  const auto mine = rendezvous::etcd_options(s, 5s).endpoints;
  CHECK((mine == rendezvous::etcd_options(s, 5s, 0).endpoints || mine == rendezvous::etcd_options(s, 5s, 1).endpoints ||
         mine == rendezvous::etcd_options(s, 5s, 2).endpoints));
  CHECK(rendezvous::etcd_options(s, 5s).endpoints == mine);  // every connection of a process, the same member
  // The same lines as etcd's parser, as std::invalid_argument: the launcher's usage error names them.
  CHECK_THROWS_WITH(rendezvous::parse_etcd_endpoints({"e1:99999"}, false),
                    "etcd endpoint 'e1:99999': the port must be a number from 1 to 65535");
  CHECK_THROWS_AS(rendezvous::parse_etcd_endpoints({"https://e1"}, false), std::invalid_argument);
  CHECK(members.front().text() == "e1:2379");
  CHECK(members[1].text() == "[::1]:23790");
}

// A thousand nodes move the round on from 3 to 4 at once; one of them
// writes. Before, each sent a transaction, and etcd takes a transaction
// through Raft even when its compare fails.
TEST_CASE("etcd store: compare_set answers from a read when the key is not as expected") {
  std::string stored;
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target == "/v3/kv/range") return range_answer("/p/round", stored);
    if (r.target == "/v3/kv/txn") return kTxnSucceeded;
    return EtcdMember::answer(404, "Not Found");
  });
  rendezvous::EtcdStore store(requests_settings_for(member).etcd, 5s);
  SECTION("another node moved it on: its value, no write") {
    stored = "4";
    CHECK(store.compare_set("round", "3", "4") == "4");
    CHECK(member.count("/v3/kv/txn") == 0);
  }
  SECTION("absent with a value expected: torch's answer, no write") {
    CHECK(store.compare_set("round", "3", "4") == "3");
    CHECK(member.count("/v3/kv/txn") == 0);
  }
  SECTION("already written by another first writer: no write") {
    stored = "0";
    CHECK(store.compare_set("round", "", "0") == "0");
    CHECK(member.count("/v3/kv/txn") == 0);
  }
  SECTION("as expected: the transaction decides") {
    stored = "3";
    CHECK(store.compare_set("round", "3", "4") == "4");
    CHECK(member.count("/v3/kv/txn") == 1);
  }
}

// The member serves one connection at a time: a second one of this node's
// would wait for the first to close, and the lease's calls would time out.
TEST_CASE("etcd store: the lease's calls share the store's connection") {
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target == "/v3/lease/grant") return EtcdMember::ok("{" + kRequestsHeader + R"(,"ID":"77","TTL":"3"})");
    if (r.target == "/v3/lease/keepalive") return EtcdMember::ok(R"({"result":{)" + kRequestsHeader + R"(,"ID":"77","TTL":"3"}})");
    if (r.target == "/v3/kv/txn") return add_applied("/p/r0/count", 1);
    if (r.target == "/v3/kv/range") return range_answer("/p/x", "v");
    if (r.target == "/v3/lease/revoke") return EtcdMember::ok("{" + kRequestsHeader + "}");
    return EtcdMember::answer(404, "Not Found");
  });
  const auto settings = requests_settings_for(member);
  rendezvous::EtcdStore store(settings.etcd, 5s);
  rendezvous::EtcdLiveness liveness(settings, store);
  CHECK(store.get("x") == "v");
  auto join = join_of(0, "descriptor");
  liveness.joining("r0/alive/", join);
  liveness.took("r0/alive/" + store.join(join).name);
  liveness.beat();
  CHECK(store.get("x") == "v");
  liveness.release();
  CHECK(member.count("/v3/lease/grant") == 1);
  CHECK(member.count("/v3/lease/keepalive") == 1);
  CHECK(member.count("/v3/lease/revoke") == 1);
  CHECK(member.connections() == 1);
}

// Every member of a job that ended well leaves at about the same time. Each
// revoke was a DELETE pushed to every member not yet leaving: a job of 200
// nodes sent 12,600 events at its end (etcd's metrics), N^2/2.
TEST_CASE("etcd store: a node leaving a job that ended well revokes no lease; a failed one does") {
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target == "/v3/lease/grant") return EtcdMember::ok("{" + kRequestsHeader + R"(,"ID":"77","TTL":"3"})");
    if (r.target == "/v3/kv/put" || r.target == "/v3/kv/txn") return kTxnSucceeded;
    if (r.target == "/v3/kv/range") return range_answer("/p/x", "");
    if (r.target == "/v3/lease/revoke") return EtcdMember::ok("{" + kRequestsHeader + "}");
    return EtcdMember::answer(404, "Not Found");
  });
  auto settings = requests_settings_for(member);
  settings.run_id = "job";
  settings.join_timeout = 5s;
  bool succeeded = true;
  SECTION("succeeded") {}
  SECTION("failed") { succeeded = false; }
  {
    rendezvous::EtcdJobStore store(settings);
    auto join = join_of(0, "descriptor");
    store.liveness()->joining("cxxrun/rdzv/job/r0/alive/", join);
    store.leave(succeeded, 0, {});
  }
  CHECK(member.count("/v3/lease/grant") == 1);
  CHECK(member.count("/v3/lease/revoke") == (succeeded ? 0 : 1));
}

// At 10,000 agents joining at once, etcd timed its own proposals out and
// each join that met it failed: "it may or may not have been applied". A
// put of this node's own key is the same put twice.
TEST_CASE("etcd store: a put etcd may have applied is sent again, not a failed join") {
  const std::string timed_out = EtcdMember::answer(
      503, R"({"error":"etcdserver: request timed out","message":"etcdserver: request timed out","code":14})");
  int puts = 0, grants = 0, txns = 0;
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target == "/v3/kv/put") return puts++ % 2 == 0 ? timed_out : EtcdMember::ok("{" + kRequestsHeader + "}");
    if (r.target == "/v3/kv/txn") return txns++ % 2 == 0 ? timed_out : add_applied("/p/r0/count", 4);
    if (r.target == "/v3/lease/grant")
      return grants++ == 0 ? timed_out : EtcdMember::ok("{" + kRequestsHeader + R"(,"ID":"77","TTL":"3"})");
    if (r.target == "/v3/kv/range") return range_answer("/p/x", "");
    return EtcdMember::answer(404, "Not Found");
  });
  const auto settings = requests_settings_for(member);
  rendezvous::EtcdStore store(settings.etcd, 5s);
  store.set("r0/node/3", "descriptor");
  CHECK(puts == 2);
  rendezvous::EtcdLiveness liveness(settings, store);
  auto join = join_of(0, "descriptor");
  CHECK(liveness.joining("r0/alive/", join));
  CHECK(grants == 2);
  CHECK(store.join(join).added.count == 4);
  CHECK(txns == 2);  // the count, the descriptor and the alive key, together
}

// At 10,000 agents, the failing node's record met "request timed out", its
// append failed, and the abort that follows it was never published: the
// others waited for it until their timeout. Applied or not, the record is
// there once.
TEST_CASE("etcd store: an append etcd may have applied is read back, not written twice") {
  const std::string timed_out = EtcdMember::answer(
      503, R"({"error":"etcdserver: request timed out","message":"etcdserver: request timed out","code":14})");
  bool applied = true;
  SECTION("the first send applied") {}
  SECTION("it did not") { applied = false; }
  std::string stored = "a\n";
  int txns = 0;
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target == "/v3/kv/range") return range_answer("/p/r0/failures", stored);
    if (r.target == "/v3/kv/txn") {
      if (txns++ == 0) {
        if (applied) stored = "a\nb\n";
        return timed_out;
      }
      stored = "a\nb\n";
      return kTxnSucceeded;
    }
    return EtcdMember::answer(404, "Not Found");
  });
  rendezvous::EtcdStore store(requests_settings_for(member).etcd, 5s);
  store.append("r0/failures", "b\n");
  CHECK(stored == "a\nb\n");
  CHECK(txns == (applied ? 1 : 2));
}

// A re-joining agent opens the next round and checks the job's config
// together (compare_sets), and reads the waiting count with the step-outs
// (add_and_get_if_set_each): each was a request per key, through etcd's
// gateway, from every one of N agents.
TEST_CASE("etcd store: a batch of compare_sets and a count with reads are one request each") {
  std::string round = "4", config = "2:2|x";
  int txns_with_puts = 0;
  auto range = [](const std::string& key, const std::string& value, int version) {
    if (value.empty() && version == 0) return std::string(R"({"response_range":{"count":"0"}})");
    return R"({"response_range":{"kvs":[{"key":")" + etcd::base64_encode(key) + R"(","create_revision":"3","mod_revision":"5","version":")" +
           std::to_string(version) + R"(","value":")" + etcd::base64_encode(value) + R"("}],"count":"1"}})";
  };
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target != "/v3/kv/txn") return EtcdMember::answer(404, "Not Found");
    if (r.body.find("request_put") != std::string::npos) {
      ++txns_with_puts;
      return kTxnSucceeded;
    }
    // The reads: answered in the order asked.
    std::string responses;
    if (r.body.find(etcd::base64_encode("/p/round")) != std::string::npos)
      responses = range("/p/round", round, 1) + "," + range("/p/config", config, 1);
    else
      responses = range("/p/r3/count", "", 3) + "," + range("/p/r3/out", "", 0);
    return EtcdMember::ok("{" + kRequestsHeader + R"(,"succeeded":true,"responses":[)" + responses + "]}");
  });
  rendezvous::EtcdStore store(requests_settings_for(member).etcd, 5s);
  SECTION("the round already moved on: one read, no write") {
    const auto answers = store.compare_sets({{"round", "3", "4"}, {"config", "", "2:2|x"}});
    CHECK(answers == std::vector<std::string>{"4", "2:2|x"});
    CHECK(member.count("/v3/kv/txn") == 1);
    CHECK(member.count("/v3/kv/range") == 0);
    CHECK(txns_with_puts == 0);
  }
  SECTION("this node moves it on: the read, then its one write") {
    round = "3";
    const auto answers = store.compare_sets({{"round", "3", "4"}, {"config", "", "2:2|x"}});
    CHECK(answers == std::vector<std::string>{"4", "2:2|x"});
    CHECK(member.count("/v3/kv/txn") == 2);
    CHECK(txns_with_puts == 1);
  }
  SECTION("the waiting count and the step-outs") {
    const auto got = store.add_and_get_if_set_each("r3/count", 0, {"r3/out"});
    CHECK(got.count == 3);
    CHECK(got.values == std::vector<std::optional<std::string>>{std::nullopt});
    CHECK(member.count("/v3/kv/txn") == 1);
    CHECK(member.count("/v3/kv/range") == 0);
  }
}

// Every re-joining agent renewed its lease, then put its alive key, then its
// descriptor: three requests each of 1,000 agents at once, where its lease,
// renewed by the beat just before, held for seconds yet. Then the add and a
// transaction of both, two. Now the add's transaction holds them: one.
TEST_CASE("etcd store: a join is one transaction: the count, the descriptor and the alive key on the lease") {
  std::string last_txn;
  bool refuse_next = false;
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target == "/v3/lease/grant") return EtcdMember::ok("{" + kRequestsHeader + R"(,"ID":"77","TTL":"3"})");
    if (r.target == "/v3/lease/keepalive") return EtcdMember::ok(R"({"result":{)" + kRequestsHeader + R"(,"ID":"77","TTL":"3"}})");
    if (r.target == "/v3/kv/txn") {
      last_txn = r.body;
      if (std::exchange(refuse_next, false))
        return EtcdMember::answer(404, R"({"error":"etcdserver: requested lease not found","message":"etcdserver: requested lease not found","code":5})");
      return add_applied("/p/r1/count", 3);
    }
    return EtcdMember::answer(404, "Not Found");
  });
  auto settings = requests_settings_for(member);  // a keep-alive every second, a TTL of 3
  rendezvous::EtcdStore store(settings.etcd, 5s);
  auto join = [&](rendezvous::EtcdLiveness& liveness, int round, const std::string& record) {
    auto j = join_of(round, record);
    const bool renewed = liveness.joining("r" + std::to_string(round) + "/alive/", j);
    const auto got = store.join(j);
    CHECK(got.added.count == 3);
    CHECK_FALSE(got.name.empty());
    // Its marker holds the descriptor; its alive key, named as the marker, is on the lease.
    CHECK(last_txn.find(etcd::base64_encode("/p/r" + std::to_string(round) + "/count/adds/" + got.name)) !=
          std::string::npos);
    CHECK(last_txn.find(etcd::base64_encode("/p/r" + std::to_string(round) + "/alive/" + got.name)) !=
          std::string::npos);
    CHECK(last_txn.find(etcd::base64_encode(record)) != std::string::npos);
    CHECK(last_txn.find(R"("lease":"77")") != std::string::npos);
    return renewed;
  };
  SECTION("a lease renewed moments ago is not renewed again") {
    rendezvous::EtcdLiveness liveness(settings, store);
    CHECK(join(liveness, 0, "d0"));  // no lease yet: granted
    CHECK_FALSE(join(liveness, 1, "d2"));
    CHECK(member.count("/v3/lease/grant") == 1);
    CHECK(member.count("/v3/lease/keepalive") == 0);
    CHECK(member.count("/v3/kv/txn") == 2);
    CHECK(member.count("/v3/kv/put") == 0);
  }
  SECTION("a renewal that may not outlast the next beat is renewed") {
    settings.keep_alive_interval = 2s;  // an interval and a half is more than the 3 s granted
    rendezvous::EtcdLiveness liveness(settings, store);
    CHECK(join(liveness, 0, "d0"));
    CHECK(join(liveness, 1, "d2"));
    CHECK(member.count("/v3/lease/keepalive") == 1);
  }
  SECTION("a lease etcd no longer has: renewed, and the join sent again") {
    rendezvous::EtcdLiveness liveness(settings, store);
    CHECK(join(liveness, 0, "d0"));
    refuse_next = true;
    join(liveness, 1, "d2");
    CHECK(member.count("/v3/lease/keepalive") == 1);
    CHECK(member.count("/v3/kv/txn") == 3);
  }
  SECTION("sent again, a join that opens the round still opens it") {
    rendezvous::EtcdLiveness liveness(settings, store);
    CHECK(join(liveness, 0, "d0"));
    refuse_next = true;
    auto j = join_of(1, "d2");
    j.open = store::StoreClient::CompareSet{"round", "0", "1"};
    liveness.joining("r1/alive/", j);
    const auto got = store.join(j);
    CHECK(member.count("/v3/kv/txn") == 3);
    // The second send holds the round's opening and the alive key, once each.
    CHECK(last_txn.find("request_txn") != std::string::npos);
    const std::string alive = etcd::base64_encode("/p/r1/alive/" + got.name);
    CHECK(last_txn.find(alive) != std::string::npos);
    CHECK(last_txn.find(alive, last_txn.find(alive) + 1) == std::string::npos);
  }
}

// Every re-joining agent that read the round not yet opened (most: they
// wake at once) sent a transaction of its own to open it, each a proposal
// through Raft. The opening now rides inside the join's ADD: one request.
TEST_CASE("etcd store: an add carries a compare_set inside its transaction") {
  std::string body;
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target != "/v3/kv/txn") return EtcdMember::answer(404, "Not Found");
    body = r.body;
    return EtcdMember::ok("{" + kRequestsHeader + R"(,"succeeded":true,"responses":[{"response_put":{}},)" +
                          R"({"response_range":{"kvs":[{"key":")" + etcd::base64_encode("/p/r4/count") +
                          R"(","create_revision":"11","mod_revision":"12","version":"2","value":""}],"count":"1"}},)" +
                          R"({"response_put":{}},{"response_txn":{"succeeded":true,"responses":[{"response_put":{}}]}}]})");
  });
  rendezvous::EtcdStore store(requests_settings_for(member).etcd, 5s);
  CHECK(store.add_and_compare_set("r4/count", {"round", "3", "4"}) == 2);
  CHECK(member.count("/v3/kv/txn") == 1);
  const auto nested = body.find("request_txn");
  REQUIRE(nested != std::string::npos);
  CHECK(body.find(etcd::base64_encode("/p/round"), nested) != std::string::npos);
  CHECK(body.find(etcd::base64_encode("3"), nested) != std::string::npos);  // compared
  CHECK(body.find(etcd::base64_encode("4"), nested) != std::string::npos);  // written
}

// A round's assigner waited for every descriptor (a read of them all) and
// then read them all again (multi_get): 2N/128 transactions one after
// another before any member could have its assignment. The values come
// with the wait's read, and a late one with its watch's event.
TEST_CASE("etcd store: wait_and_get reads each key once, and takes a late one from the watch") {
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target == "/v3/kv/txn")  // node/0 is there, node/1 not yet
      return EtcdMember::ok("{" + kRequestsHeader + R"(,"succeeded":true,"responses":[{"response_range":{"kvs":[{"key":")" +
                            etcd::base64_encode("/p/r0/node/0") + R"(","create_revision":"3","mod_revision":"3","version":"1","value":")" +
                            etcd::base64_encode("a|h|1|2") + R"("}],"count":"1"}},{"response_range":{"count":"0"}}]})");
    if (r.target == "/v3/watch") return EtcdMember::stream({R"({"result":{"header":{"revision":"12"},"created":true}})"});
    return EtcdMember::answer(404, "Not Found");
  });
  rendezvous::EtcdStore store(requests_settings_for(member).etcd, 5s);
  auto got = std::async(std::launch::async, [&] { return store.wait_and_get({"r0/node/0", "r0/node/1"}, 5s); });
  for (int i = 0; i < 200 && member.count("/v3/watch") == 0; ++i) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(50ms);
  member.push(R"({"result":{"header":{"revision":"13"},"events":[{"kv":{"key":")" + etcd::base64_encode("/p/r0/node/1") +
              R"(","value":")" + etcd::base64_encode("b|h|2|2") + R"(","mod_revision":"13"}}]}})");
  CHECK(got.get() == std::vector<std::string>{"a|h|1|2", "b|h|2|2"});
  CHECK(member.count("/v3/kv/txn") == 1);  // one read, no multi_get after it
  CHECK(member.count("/v3/kv/range") == 0);
}

// A round's assigner reads every member's descriptor, then its group rank 0
// every member's address: 3,000 keys were 24 transactions of 128 reads, one
// after another while every member waited. Now pages of their prefix's
// range, the second read at the first's revision (one snapshot).
TEST_CASE("etcd store: many keys under one prefix are read as pages of its range") {
  std::map<std::string, std::string> stored;  // etcd's keys
  for (int i = 0; i < 3000; ++i) stored["/p/r1/node/" + std::to_string(i)] = "host" + std::to_string(i);
  stored["/p/r1/node/spare"] = "not asked for";
  stored["/p/r1/nodf"] = "outside the prefix";
  int txns = 0, revision = 12;
  std::vector<nlohmann::json> ranges;
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target == "/v3/kv/txn") {
      ++txns;
      const std::string kv = R"({"response_range":{"kvs":[{"key":"eA==","value":"eA==","version":"1"}],"count":"1"}})";
      return EtcdMember::ok("{" + kRequestsHeader + R"(,"succeeded":true,"responses":[)" + kv + "," + kv + "]}");
    }
    if (r.target != "/v3/kv/range") return EtcdMember::answer(404, "Not Found");
    const auto asked = nlohmann::json::parse(r.body);
    ranges.push_back(asked);
    const std::string from = *etcd::base64_decode(asked.at("key").get<std::string>());
    const std::string to = *etcd::base64_decode(asked.at("range_end").get<std::string>());
    const size_t limit = std::stoul(asked.value("limit", "0"));
    nlohmann::json kvs = nlohmann::json::array();
    bool more = false;
    for (auto it = stored.lower_bound(from); it != stored.end() && it->first < to; ++it) {
      if (kvs.size() == limit) {
        more = true;
        break;
      }
      kvs.push_back({{"key", etcd::base64_encode(it->first)}, {"value", etcd::base64_encode(it->second)},
                     {"create_revision", "3"}, {"mod_revision", "3"}, {"version", "1"}});
    }
    const nlohmann::json answer = {{"header", {{"revision", std::to_string(revision++)}}}, {"kvs", kvs}, {"more", more}};
    return EtcdMember::ok(answer.dump());
  });
  rendezvous::EtcdStore store(requests_settings_for(member).etcd, 5s);
  std::vector<std::string> keys;
  for (int i = 0; i < 3000; ++i) keys.push_back("r1/node/" + std::to_string(i));
  const auto values = store.multi_get(keys);
  REQUIRE(values.size() == keys.size());
  for (int i : {0, 1, 10, 2047, 2048, 2999}) CHECK(values[i] == "host" + std::to_string(i));
  CHECK(txns == 0);
  REQUIRE(ranges.size() == 2);
  CHECK(*etcd::base64_decode(ranges[0].at("key").get<std::string>()) == "/p/r1/node/");
  CHECK_FALSE(ranges[0].contains("revision"));
  CHECK(ranges[1].value("revision", "") == "12");
  // The second page starts just after the first's last key.
  CHECK(etcd::base64_decode(ranges[1].at("key").get<std::string>())->back() == '\0');
  SECTION("a key absent from the range is absent") {
    stored.erase("/p/r1/node/2500");
    ranges.clear();
    CHECK_THROWS_WITH(store.multi_get(keys), Catch::Contains("no key r1/node/2500"));
    CHECK(ranges.size() == 2);
  }
  SECTION("a few keys are still one transaction") {
    CHECK_NOTHROW(store.multi_get({"r1/node/0", "r1/node/1"}));
    CHECK(txns == 1);
    CHECK(ranges.size() == 2);
  }
}

// The round's last joiner completes it and wakes the waiters of the last
// wake key: a read, a transaction and a put, each of the two writes pushed
// to every agent's milestone watch (N messages each). Now one transaction,
// one revision: one message to each watch.
TEST_CASE("etcd store: a compare_set and a set are one transaction") {
  std::string body;
  std::string complete;  // the member's value of /p/r1/complete
  EtcdMember member([&](const EtcdMember::Request& r) -> std::string {
    if (r.target != "/v3/kv/txn") return EtcdMember::answer(404, "Not Found");
    body = r.body;
    if (complete.empty())
      return EtcdMember::ok("{" + kRequestsHeader + R"(,"succeeded":true,"responses":[{"response_put":{}},{"response_put":{}}]})");
    return EtcdMember::ok("{" + kRequestsHeader + R"(,"succeeded":false,"responses":[{"response_range":{"kvs":[{"key":")" +
                          etcd::base64_encode("/p/r1/complete") + R"(","create_revision":"9","mod_revision":"9","version":"1","value":")" +
                          etcd::base64_encode(complete) + R"("}],"count":"1"}},{"response_put":{}}]})");
  });
  rendezvous::EtcdStore store(requests_settings_for(member).etcd, 5s);
  SECTION("this node completes the round") {
    CHECK(store.compare_set_and_set({"r1/complete", "", "4|3"}, "r1/wake/3", "complete") == "4|3");
  }
  SECTION("another did first: its answer, and the wake key set all the same") {
    complete = "4|2";
    CHECK(store.compare_set_and_set({"r1/complete", "", "4|3"}, "r1/wake/3", "complete") == "4|2");
  }
  CHECK(member.count("/v3/kv/txn") == 1);
  CHECK(member.count("/v3/kv/range") == 0);
  CHECK(member.count("/v3/kv/put") == 0);
  const auto j = nlohmann::json::parse(body);
  REQUIRE(j["success"].size() == 2);
  CHECK(j["success"][0]["request_put"]["key"] == etcd::base64_encode("/p/r1/complete"));
  CHECK(j["success"][1]["request_put"]["key"] == etcd::base64_encode("/p/r1/wake/3"));
  CHECK(j["success"][1]["request_put"]["value"] == etcd::base64_encode("complete"));
  REQUIRE(j["failure"].size() == 2);
  CHECK(j["failure"][0]["request_range"]["key"] == etcd::base64_encode("/p/r1/complete"));
  CHECK(j["failure"][1]["request_put"]["key"] == etcd::base64_encode("/p/r1/wake/3"));
}
