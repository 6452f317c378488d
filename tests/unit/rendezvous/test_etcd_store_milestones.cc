// EtcdStore's milestones (StoreClient::expect_waits_under): a round's keys
// that every member waits for are served from one watch on their prefix,
// against a fake member that counts requests. Each watch is a stream through
// etcd's gateway: an agent made about five per re-join, a watch per wait.
#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <thread>

#include "etcd/base64.h"
#include "fake_etcd_member.h"
#include "rendezvous/etcd_endpoints.h"
#include "rendezvous/etcd_store.h"
#include "store/client_errors.h"

using namespace cxxrun;
using namespace std::chrono_literals;
using Member = FakeEtcdMember;

namespace {

const std::string kMilestoneHeader = R"("header":{"cluster_id":"1","member_id":"2","revision":"10"})";

std::string milestone_put(const std::string& key, const std::string& value, int revision) {
  return R"({"result":{"header":{"revision":")" + std::to_string(revision) + R"("},"events":[{"kv":{"key":")" +
         etcd::base64_encode(key) + R"(","value":")" + etcd::base64_encode(value) + R"(","mod_revision":")" +
         std::to_string(revision) + R"("}}]}})";
}

rendezvous::EtcdSettings milestone_settings(const Member& m) {
  rendezvous::EtcdSettings s;
  s.endpoints = rendezvous::parse_etcd_endpoints({m.endpoint()}, false);
  s.prefix = "/p";
  return s;
}

// A member where every key is absent when read: what is written comes on
// the watches (Member::push).
std::string nothing_written(const Member::Request& r) {
  if (r.target == "/v3/kv/range") return Member::ok("{" + kMilestoneHeader + R"(,"count":"0"})");
  if (r.target == "/v3/watch") return Member::stream({R"({"result":{"header":{"revision":"10"},"created":true}})"});
  return Member::answer(404, "Not Found");
}

// Until the member has `n` watch streams open (the store opened its watch).
void await_milestone_streams(const Member& m, int n) {
  for (int i = 0; i < 200 && m.count("/v3/watch") < n; ++i) std::this_thread::sleep_for(10ms);
  std::this_thread::sleep_for(50ms);  // the stream's answer on its way
}

}  // namespace

TEST_CASE("etcd store: waits for a round's milestones share one watch") {
  Member member(nothing_written);
  rendezvous::EtcdStore store(milestone_settings(member), 5s);
  bool milestones = true;
  SECTION("told where the milestones are") { store.expect_waits_under("m/"); }
  SECTION("not told: a watch per wait") { milestones = false; }

  auto complete = std::async(std::launch::async, [&] { return store.get("m/r1/complete", 5s); });
  await_milestone_streams(member, 1);
  // The round completes, and group rank 0 names the master before this
  // node asks for it: the watch has it already.
  member.push(milestone_put("/p/m/r1/complete", "4|0", 11));
  REQUIRE(complete.get() == "4|0");
  const int ranges = member.count("/v3/kv/range");
  member.push(milestone_put("/p/m/r1/master", "10.0.0.1:29500", 12));
  std::this_thread::sleep_for(50ms);
  auto master = std::async(std::launch::async, [&] { return store.get("m/r1/master", 5s); });
  if (!milestones) {
    await_milestone_streams(member, 2);
    member.push(milestone_put("/p/m/r1/master", "10.0.0.1:29500", 12));
  }
  REQUIRE(master.get() == "10.0.0.1:29500");
  const auto again = store.get_if_set("m/r1/complete");
  if (milestones) {
    CHECK(again == std::optional<std::string>("4|0"));
    CHECK(member.count("/v3/watch") == 1);
    CHECK(member.count("/v3/kv/range") == ranges);  // master and complete again: no request
  } else {
    CHECK(member.count("/v3/watch") == 2);
    CHECK(member.count("/v3/kv/range") == ranges + 2);  // master, then complete again
  }
}

// The round watcher waits for the event in half-second slices for as long
// as the round runs: a slice after the first costs no request.
TEST_CASE("etcd store: a milestone read absent is waited for on the watch, not read again") {
  Member member(nothing_written);
  rendezvous::EtcdStore store(milestone_settings(member), 5s);
  store.expect_waits_under("m/");
  for (int slice = 0; slice < 3; ++slice) CHECK_THROWS_AS(store.get("m/r1/event", 100ms), store::StoreTimeout);
  // The round's other milestones were read with it (one range of the
  // round's group): they come on the same watch.
  CHECK_THROWS_AS(store.wait({"m/r1/all_stopped"}, 100ms), store::StoreTimeout);
  CHECK_FALSE(store.get_if_set("m/r1/next"));
  CHECK(member.count("/v3/kv/range") == 1);
  CHECK(member.count("/v3/watch") == 1);
  member.push(milestone_put("/p/m/r1/event", "abort", 11));
  CHECK(store.get("m/r1/event", 5s) == "abort");
  CHECK(member.count("/v3/kv/range") == 1);
  // The next round's: one more read, the same watch.
  CHECK_FALSE(store.get_if_set("m/r2/complete"));
  CHECK_FALSE(store.get_if_set("m/r2/master"));
  CHECK(member.count("/v3/kv/range") == 2);
  CHECK(member.count("/v3/watch") == 1);
  // A key outside the milestones is read and watched as before.
  auto other = std::async(std::launch::async, [&] { return store.get("r1/assign/0", 5s); });
  await_milestone_streams(member, 2);
  member.push(milestone_put("/p/r1/assign/0", "0|0|8|", 12));
  CHECK(other.get() == "0|0|8|");
  CHECK(member.count("/v3/kv/range") == 3);
}

// Every re-joining agent read the new round's milestones once (a range of
// its group) before waiting for them on the watch it held since the first
// round: a request per agent per round that the watch answered anyway.
// Every milestone of a round follows its count's first ADD
// (StoreClient::milestones_follow); a counter created after the watch began
// proves the watch brings them all.
TEST_CASE("etcd store: a round whose count began after the watch is not read") {
  std::string created;
  Member member([&](const Member::Request& r) -> std::string {
    if (r.target == "/v3/kv/txn")  // the ADD: put, the count read back, the marker
      return Member::ok("{" + kMilestoneHeader + R"(,"succeeded":true,"responses":[{"response_put":{}},)" +
                        R"({"response_range":{"kvs":[{"key":")" + etcd::base64_encode("/p/r2/count") +
                        R"(","create_revision":")" + created + R"(","mod_revision":"14","version":"3","value":""}],"count":"1"}},)" +
                        R"({"response_put":{}}]})");
    return nothing_written(r);
  });
  rendezvous::EtcdStore store(milestone_settings(member), 5s);
  store.expect_waits_under("m/");
  CHECK_FALSE(store.get_if_set("m/r1/event"));  // round 1's read opens the watch, from revision 11
  REQUIRE(member.count("/v3/kv/range") == 1);
  int ranges = 1;
  SECTION("first added to after the watch began") {
    created = "12";
  }
  SECTION("before: the round is read") {
    created = "9";
    ranges = 2;
  }
  CHECK(store.add("r2/count", 1) == 3);
  store.milestones_follow("m/r2/", "r2/count");
  CHECK_FALSE(store.get_if_set("m/r2/complete"));
  CHECK(member.count("/v3/kv/range") == ranges);
  // And a counter other than the one last added to proves nothing.
  store.milestones_follow("m/r3/", "r3/count");
  CHECK_FALSE(store.get_if_set("m/r3/complete"));
  CHECK(member.count("/v3/kv/range") == ranges + 1);
}

// The watch is made by the first read of a milestone that finds it absent:
// from a get_if_set (no waiting, a deadline of now) it had a millisecond to
// be created, and on a busy member the read failed ("not created in 1 ms").
TEST_CASE("etcd store: a milestone's first read without waiting gives its watch the store's time") {
  Member member([](const Member::Request& r) {
    if (r.target == "/v3/watch") std::this_thread::sleep_for(50ms);  // a busy member
    return nothing_written(r);
  });
  rendezvous::EtcdStore store(milestone_settings(member), 5s);
  store.expect_waits_under("m/");
  CHECK_FALSE(store.get_if_set("m/r1/event"));
  CHECK(member.count("/v3/watch") == 1);
}

// The round watcher's connection is told the round events' prefix, and
// every event key lies right under it: its group is the prefix, not the
// empty string (a read of etcd's whole key space).
TEST_CASE("etcd store: a milestone right under the prefix is read with the prefix's keys") {
  Member member(nothing_written);
  rendezvous::EtcdStore store(milestone_settings(member), 5s);
  store.expect_waits_under("m/event/");
  CHECK_FALSE(store.get_if_set("m/event/r1"));
  std::vector<Member::Request> ranges;
  for (const auto& r : member.requests())
    if (r.target == "/v3/kv/range") ranges.push_back(r);
  REQUIRE(ranges.size() == 1);
  CHECK(ranges[0].body.find(R"("key":")" + etcd::base64_encode("/p/m/event/") + "\"") != std::string::npos);
  CHECK(member.count("/v3/watch") == 1);
  CHECK_FALSE(store.get_if_set("m/event/r2"));  // the group was read while the watch ran
  CHECK(member.count("/v3/kv/range") == 1);
}
