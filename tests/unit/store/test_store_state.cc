#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "store/state.h"
#include "store/wire.h"
#include "store_wire_bytes.h"

using namespace cxxrun::store;
using C = StoreCommand;
using Outcome = StoreState::Outcome;
using store_bytes::bytes;
using store_bytes::i64;

namespace {

constexpr StoreState::ClientId A = 1, B = 2, W = 3;

StoreRequest req(C command, std::vector<std::string> keys = {}, std::vector<std::string> values = {}) {
  StoreRequest r;
  r.command = command;
  r.keys = std::move(keys);
  r.values = std::move(values);
  return r;
}

StoreRequest add(const std::string& key, int64_t delta) {
  StoreRequest r = req(C::add, {key});
  r.delta = delta;
  return r;
}

// Everything `outcome` sends to `client`, in order.
std::string to(const Outcome& outcome, StoreState::ClientId client) {
  std::string all;
  for (const auto& d : outcome.deliveries)
    if (d.client == client) all += d.bytes;
  return all;
}

struct Store {
  StoreState state;
  Outcome run(StoreState::ClientId client, const StoreRequest& r, OpTable table = OpTable::modern) {
    return state.apply(client, table, r);
  }
  // The requester's reply, checking nobody else heard anything.
  std::string ask(StoreState::ClientId client, const StoreRequest& r, OpTable table = OpTable::modern) {
    Outcome o = run(client, r, table);
    for (const auto& d : o.deliveries) CHECK(d.client == client);
    CHECK_FALSE(o.close);
    return to(o, client);
  }
  std::string get(const std::string& key) { return ask(A, req(C::get, {key})); }
};

}  // namespace

TEST_CASE("store state: set, get, and a missing key per table") {
  Store s;
  CHECK(s.ask(A, req(C::set, {"/k"}, {"v"})).empty());
  CHECK(s.get("/k") == bytes("v"));
  CHECK(s.ask(A, req(C::set, {"/k"}, {"w"})).empty());
  CHECK(s.get("/k") == bytes("w"));

  // Modern answers empty bytes; 1.13 threw, which closed the connection.
  CHECK(s.get("/missing") == bytes(""));
  Outcome o = s.run(A, req(C::get, {"/missing"}), OpTable::legacy);
  CHECK(o.close);
  CHECK(o.deliveries.empty());
  CHECK_THAT(o.error, Catch::Contains("/missing"));
}

TEST_CASE("store state: add keeps a decimal counter") {
  Store s;
  CHECK(s.ask(A, add("/c", 5)) == i64(5));
  CHECK(s.ask(A, add("/c", -7)) == i64(-2));
  CHECK(s.get("/c") == bytes("-2"));

  // As std::stoll reads it: leading blanks and a '+', trailing text ignored.
  s.ask(A, req(C::set, {"/t"}, {" +12abc"}));
  CHECK(s.ask(A, add("/t", 1)) == i64(13));

  // Not a number, or past int64: the connection closes, the value stays.
  s.ask(A, req(C::set, {"/s"}, {"abc"}));
  Outcome o = s.run(A, add("/s", 1));
  CHECK(o.close);
  CHECK(o.deliveries.empty());
  CHECK(s.get("/s") == bytes("abc"));
  s.ask(A, req(C::set, {"/big"}, {"9223372036854775807"}));
  CHECK(s.run(A, add("/big", 1)).close);
  s.ask(A, req(C::set, {"/empty"}, {""}));
  CHECK(s.run(A, add("/empty", 1)).close);
}

TEST_CASE("store state: compare_set and torch's quirk") {
  Store s;
  // Absent, expected empty: created, answers desired.
  CHECK(s.ask(A, req(C::compare_set, {"/k"}, {"", "first"})) == bytes("first"));
  CHECK(s.get("/k") == bytes("first"));
  // Present and equal: swapped.
  CHECK(s.ask(A, req(C::compare_set, {"/k"}, {"first", "second"})) == bytes("second"));
  // Present and different: unchanged, answers the current value.
  CHECK(s.ask(A, req(C::compare_set, {"/k"}, {"first", "third"})) == bytes("second"));
  CHECK(s.get("/k") == bytes("second"));
  // Absent, expected non-empty: answers `expected` and stores nothing.
  CHECK(s.ask(A, req(C::compare_set, {"/absent"}, {"Y2FuaW1hZGFt", "x"})) == bytes("Y2FuaW1hZGFt"));
  CHECK(s.ask(A, req(C::check, {"/absent"})) == store_bytes::kNotReady);
}

TEST_CASE("store state: check, num keys, delete") {
  Store s;
  CHECK(s.ask(A, req(C::check, {})) == store_bytes::kReady);
  CHECK(s.ask(A, req(C::check, {"/a"})) == store_bytes::kNotReady);
  s.ask(A, req(C::set, {"/a"}, {"1"}));
  s.ask(A, add("/b", 1));
  CHECK(s.ask(A, req(C::check, {"/a", "/b"})) == store_bytes::kReady);
  CHECK(s.ask(A, req(C::check, {"/a", "/c"})) == store_bytes::kNotReady);
  CHECK(s.ask(A, req(C::get_num_keys)) == i64(2));
  CHECK(s.ask(A, req(C::delete_key, {"/a"})) == i64(1));
  CHECK(s.ask(A, req(C::delete_key, {"/a"})) == i64(0));
  CHECK(s.ask(A, req(C::get_num_keys)) == i64(1));
  CHECK(s.state.num_keys() == 1);
}

TEST_CASE("store state: append, multi_get, multi_set, ping, validate") {
  Store s;
  CHECK(s.ask(A, req(C::append, {"/log"}, {"ab"})).empty());
  CHECK(s.ask(A, req(C::append, {"/log"}, {"cd"})).empty());
  CHECK(s.get("/log") == bytes("abcd"));

  CHECK(s.ask(A, req(C::multi_set, {"/x", "/y"}, {"1", "2"})).empty());
  CHECK(s.ask(A, req(C::multi_get, {"/y", "/nope", "/x"})) == bytes("2") + bytes("") + bytes("1"));

  StoreRequest ping = req(C::ping);
  ping.nonce = 0xDEADBEEF;
  CHECK(s.ask(A, ping) == store_bytes::u32(0xDEADBEEF));
  CHECK(s.ask(A, req(C::validate)).empty());
}

TEST_CASE("store state: a MULTI_GET reply over the total limit closes") {
  Store s;
  s.ask(A, req(C::set, {"/big"}, {std::string(wire::kMaxValueBytes, 'x')}));
  std::vector<std::string> keys(wire::kMaxRequestBytes / wire::kMaxValueBytes + 1, "/big");
  Outcome o = s.run(A, req(C::multi_get, keys));
  CHECK(o.close);
  CHECK(o.deliveries.empty());
}

TEST_CASE("store state: wait answers at once or when the last key appears") {
  Store s;
  s.ask(A, req(C::set, {"/a"}, {"1"}));
  CHECK(s.ask(A, req(C::wait, {"/a"})) == store_bytes::kStopWaiting);
  CHECK(s.ask(A, req(C::wait, {})) == store_bytes::kStopWaiting);

  CHECK(s.ask(B, req(C::wait, {"/a", "/b", "/c"})).empty());
  CHECK(s.state.waiting_clients() == 1);
  Outcome o = s.run(A, req(C::set, {"/b"}, {"2"}));
  CHECK(to(o, B).empty());
  o = s.run(A, add("/c", 1));
  CHECK(to(o, A) == i64(1));
  CHECK(to(o, B) == store_bytes::kStopWaiting);
  CHECK(s.state.waiting_clients() == 0);
  // Answered once only.
  CHECK(s.run(A, req(C::set, {"/c"}, {"again"})).deliveries.empty());
}

TEST_CASE("store state: every creating op wakes waiters, delete does not") {
  Store s;
  struct Case {
    const char* name;
    StoreRequest request;
  };
  std::vector<Case> cases = {
      {"set", req(C::set, {"/k"}, {"v"})},
      {"add", add("/k", 1)},
      {"append", req(C::append, {"/k"}, {"v"})},
      {"compare_set create", req(C::compare_set, {"/k"}, {"", "v"})},
      {"multi_set", req(C::multi_set, {"/other", "/k"}, {"1", "2"})},
      {"queue_push", req(C::queue_push, {"/k"}, {"item"})},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Store fresh;
    CHECK(fresh.ask(B, req(C::wait, {"/k"})).empty());
    CHECK(to(fresh.run(W, req(C::delete_key, {"/k"})), B).empty());
    CHECK(to(fresh.run(W, req(C::compare_set, {"/k"}, {"x", "y"})), B).empty());
    CHECK(to(fresh.run(W, c.request), B) == store_bytes::kStopWaiting);
  }
}

TEST_CASE("store state: several clients wait on one key") {
  Store s;
  s.ask(A, req(C::wait, {"/k"}));
  s.ask(B, req(C::wait, {"/k", "/k"}));  // counted twice, woken by one set
  Outcome o = s.run(W, req(C::set, {"/k"}, {"v"}));
  CHECK(to(o, A) == store_bytes::kStopWaiting);
  CHECK(to(o, B) == store_bytes::kStopWaiting);
}

TEST_CASE("store state: cancel_wait") {
  Store s;
  s.ask(A, req(C::wait, {"/k"}));
  CHECK(s.ask(A, req(C::cancel_wait)) == store_bytes::kWaitCanceled);
  CHECK(s.state.waiting_clients() == 0);
  CHECK(to(s.run(B, req(C::set, {"/k"}, {"v"})), A).empty());
  // After STOP_WAITING already went out, the cancel is still answered.
  s.ask(A, req(C::wait, {"/k2"}));
  CHECK(to(s.run(B, req(C::set, {"/k2"}, {"v"})), A) == store_bytes::kStopWaiting);
  CHECK(s.ask(A, req(C::cancel_wait)) == store_bytes::kWaitCanceled);
}

TEST_CASE("store state: a new WAIT replaces one the client gave up on") {
  Store s;
  // 1.13: wait(/a) times out client-side, then get(/b) sends WAIT(/b).
  s.ask(A, req(C::wait, {"/a"}), OpTable::legacy);
  s.ask(A, req(C::wait, {"/b"}), OpTable::legacy);
  CHECK(to(s.run(B, req(C::set, {"/a"}, {"1"})), A).empty());
  CHECK(to(s.run(B, req(C::set, {"/b"}, {"2"})), A) == store_bytes::kStopWaiting);

  // Re-waiting on the same key gets one answer, not two.
  s.ask(A, req(C::wait, {"/c"}), OpTable::legacy);
  s.ask(A, req(C::wait, {"/c"}), OpTable::legacy);
  CHECK(to(s.run(B, req(C::set, {"/c"}, {"3"})), A) == store_bytes::kStopWaiting);

  // A WAIT answered at once also drops the abandoned one.
  s.ask(A, req(C::wait, {"/d"}), OpTable::legacy);
  CHECK(s.ask(A, req(C::wait, {"/a"}), OpTable::legacy) == store_bytes::kStopWaiting);
  CHECK(to(s.run(B, req(C::set, {"/d"}, {"4"})), A).empty());
}

TEST_CASE("store state: disconnect forgets the client's wait and watches") {
  Store s;
  s.ask(A, req(C::wait, {"/k"}));
  s.ask(W, req(C::watch_key, {"/k"}), OpTable::legacy);
  s.state.disconnect(A);
  s.state.disconnect(W);
  CHECK(s.state.waiting_clients() == 0);
  CHECK(s.run(B, req(C::set, {"/k"}, {"v"})).deliveries.empty());
}

TEST_CASE("store state: queues") {
  Store s;
  CHECK(s.ask(A, req(C::queue_len, {"q"})) == i64(0));
  CHECK(s.ask(A, req(C::queue_pop, {"q"})) == i64(0));
  s.ask(A, req(C::queue_push, {"q"}, {"one"}));
  s.ask(A, req(C::queue_push, {"q"}, {"two"}));
  CHECK(s.ask(A, req(C::queue_len, {"q"})) == i64(2));
  // A non-empty queue counts as present; it is not a key.
  CHECK(s.ask(A, req(C::check, {"q"})) == store_bytes::kReady);
  CHECK(s.ask(A, req(C::wait, {"q"})) == store_bytes::kStopWaiting);
  CHECK(s.ask(A, req(C::get_num_keys)) == i64(0));
  // Pop answers the length before popping, then the item.
  CHECK(s.ask(A, req(C::queue_pop, {"q"})) == i64(2) + bytes("one"));
  CHECK(s.ask(A, req(C::queue_pop, {"q"})) == i64(1) + bytes("two"));
  CHECK(s.ask(A, req(C::check, {"q"})) == store_bytes::kNotReady);

  // One push wakes one waiter, the oldest.
  s.ask(A, req(C::wait, {"q"}));
  s.ask(B, req(C::wait, {"q"}));
  Outcome o = s.run(W, req(C::queue_push, {"q"}, {"x"}));
  CHECK(to(o, A) == store_bytes::kStopWaiting);
  CHECK(to(o, B).empty());
  o = s.run(W, req(C::queue_push, {"q"}, {"y"}));
  CHECK(to(o, B) == store_bytes::kStopWaiting);
}

TEST_CASE("store state: legacy WATCH_KEY pushes every change") {
  Store s;
  auto legacy = OpTable::legacy;
  CHECK(s.ask(W, req(C::watch_key, {"/k"}), legacy) == store_bytes::kWatchRegistered);
  using store_bytes::watch_push;
  Outcome o = s.run(A, req(C::set, {"/k"}, {"1"}), legacy);
  CHECK(to(o, W) == watch_push(1, "/k", "", "1"));
  o = s.run(A, req(C::set, {"/k"}, {"2"}), legacy);
  CHECK(to(o, W) == watch_push(0, "/k", "1", "2"));
  o = s.run(A, add("/k", 3), legacy);
  CHECK(to(o, A) == i64(5));
  CHECK(to(o, W) == watch_push(0, "/k", "2", "5"));
  o = s.run(A, req(C::compare_set, {"/k"}, {"5", "6"}), legacy);
  CHECK(to(o, W) == watch_push(0, "/k", "5", "6"));
  o = s.run(A, req(C::delete_key, {"/k"}), legacy);
  CHECK(to(o, W) == watch_push(2, "/k", "6", ""));
  // Other keys are not pushed.
  CHECK(to(s.run(A, req(C::set, {"/other"}, {"x"}), legacy), W).empty());
}
