// A real StoreServer on 127.0.0.1, driven by raw sockets speaking bytes.
#include <sys/resource.h>

#include <catch2/catch.hpp>
#include <mutex>
#include <chrono>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "listener.h"
#include "raw_socket.h"
#include "store/server.h"
#include "store_wire_bytes.h"

using namespace cxxrun::store;
using store_bytes::bytes;
using store_bytes::i64;
using store_bytes::LegacyOp;
using store_bytes::Msg;
using store_bytes::Op;

namespace {

struct Server {
  BackgroundStoreServer server{StoreServerOptions{"127.0.0.1", 0}};
  int port() const { return server.port(); }
};

// A client past the modern handshake.
std::unique_ptr<RawSocket> modern_client(int port) {
  auto s = std::make_unique<RawSocket>(port);
  REQUIRE(s->ask(store_bytes::validate() + std::string(Msg(Op::ping).u32(77)), 4) ==
          store_bytes::u32(77));
  return s;
}

}  // namespace

TEST_CASE("store server: binds port 0 and reports the port") {
  Server s;
  CHECK(s.port() > 0);
  CHECK(s.server.address() == "127.0.0.1:" + std::to_string(s.port()));
}

TEST_CASE("store server: an empty host listens on every interface") {
  BackgroundStoreServer server(StoreServerOptions{"", 0});
  std::string address = server.address();
  CHECK((address.rfind("[::]:", 0) == 0 || address.rfind("0.0.0.0:", 0) == 0));
  // Reachable over IPv4 either way (dual-stack or the 0.0.0.0 fallback).
  RawSocket c(server.port());
  CHECK(c.ask(Msg(LegacyOp::get_num_keys), 8) == i64(0));
}

TEST_CASE("store server: a port in use fails at construction, naming it") {
  Listener busy;
  try {
    BackgroundStoreServer server(StoreServerOptions{"127.0.0.1", busy.port});
    FAIL("bound a busy port");
  } catch (const std::system_error& e) {
    CHECK_THAT(e.what(), Catch::Contains(std::to_string(busy.port)));
    CHECK_THAT(e.what(), Catch::Contains("in use"));
  }
}

TEST_CASE("store server: a peer the admit check refuses is closed before any request") {
  StoreServerOptions options{"127.0.0.1", 0};
  std::vector<std::string> asked;
  std::mutex mu;
  options.admit = [&](const std::string& peer) {
    std::lock_guard l(mu);
    asked.push_back(peer);
    return false;
  };
  BackgroundStoreServer server(options);
  RawSocket c(server.port());
  CHECK(c.closed_by_server());
  std::lock_guard l(mu);
  CHECK(asked == std::vector<std::string>{"127.0.0.1"});
}

TEST_CASE("store server: modern opcodes") {
  Server s;
  auto c = modern_client(s.port());
  CHECK(c->send(Msg(Op::set).str("/k").str("v")));
  CHECK(c->ask(Msg(Op::get).str("/k"), 9) == bytes("v"));
  CHECK(c->ask(Msg(Op::get).str("/missing"), 8) == bytes(""));
  CHECK(c->ask(Msg(Op::add).str("/c").i64(5), 8) == i64(5));
  CHECK(c->ask(Msg(Op::add).str("/c").i64(2), 8) == i64(7));
  CHECK(c->ask(Msg(Op::compare_set).str("/k").str("v").str("w"), 9) == bytes("w"));
  CHECK(c->ask(Msg(Op::compare_set).str("/n").str("e").str("d"), 9) == bytes("e"));
  CHECK(c->ask(Msg(Op::check).keys({"/k", "/c"}), 1) == store_bytes::kReady);
  CHECK(c->ask(Msg(Op::check).keys({"/k", "/x"}), 1) == store_bytes::kNotReady);
  CHECK(c->ask(Msg(Op::wait).keys({"/k"}), 1) == store_bytes::kStopWaiting);
  CHECK(c->ask(Msg(Op::get_num_keys), 8) == i64(2));
  CHECK(c->ask(Msg(Op::delete_key).str("/c"), 8) == i64(1));
  CHECK(c->ask(Msg(Op::delete_key).str("/c"), 8) == i64(0));
  CHECK(c->send(Msg(Op::append).str("/log").str("ab")));
  CHECK(c->send(Msg(Op::append).str("/log").str("cd")));
  CHECK(c->send(Msg(Op::multi_set).u64(2).str("/x").str("1").str("/y").str("22")));
  CHECK(c->ask(Msg(Op::multi_get).keys({"/log", "/x", "/y"}), 12 + 9 + 10) ==
        bytes("abcd") + bytes("1") + bytes("22"));
  CHECK(c->send(Msg(Op::queue_push).str("q").str("item")));
  CHECK(c->ask(Msg(Op::queue_len).str("q"), 8) == i64(1));
  CHECK(c->ask(Msg(Op::queue_pop).str("q"), 20) == i64(1) + bytes("item"));
  CHECK(c->ask(Msg(Op::queue_pop).str("q"), 8) == i64(0));
}

TEST_CASE("store server: legacy opcodes, as torch 1.13 sends them") {
  Server s;
  RawSocket c(s.port());
  // Bytes observed from 1.13 (docs/store-protocol.md §3.1, §8).
  CHECK(c.ask(Msg(LegacyOp::add).str("init/").i64(1), 8) == i64(1));
  CHECK(c.send(Msg(LegacyOp::set).str("/k1").str("v1")));
  CHECK(c.ask(Msg(LegacyOp::wait).keys({"/k1"}).then(Msg(LegacyOp::get).str("/k1")), 1 + 10) ==
        store_bytes::kStopWaiting + bytes("v1"));
  CHECK(c.ask(Msg(LegacyOp::compare_set).str("/r").str("").str("Y2FuaW1hZGFt"), 20) ==
        bytes("Y2FuaW1hZGFt"));
  CHECK(c.ask(Msg(LegacyOp::check).keys({"/r", "/k1"}), 1) == store_bytes::kReady);
  CHECK(c.ask(Msg(LegacyOp::get_num_keys), 8) == i64(3));
  CHECK(c.ask(Msg(LegacyOp::delete_key).str("/r"), 8) == i64(1));

  RawSocket watcher(s.port());
  CHECK(watcher.ask(Msg(LegacyOp::watch_key).str("/k1"), 1) == store_bytes::kWatchRegistered);
  CHECK(c.send(Msg(LegacyOp::set).str("/k1").str("v2")));
  std::string push = store_bytes::watch_push(0, "/k1", "v1", "v2");
  CHECK(watcher.recv(push.size()) == push);

  // 1.13's server threw on a missing key, and so closed the connection.
  CHECK(c.send(Msg(LegacyOp::get).str("/missing")));
  CHECK(c.closed_by_server());
}

TEST_CASE("store server: both tables share one key space") {
  Server s;
  RawSocket legacy(s.port());
  auto modern = modern_client(s.port());
  CHECK(legacy.send(Msg(LegacyOp::set).str("/shared").str("from 1.13")));
  CHECK(legacy.ask(Msg(LegacyOp::get_num_keys), 8) == i64(1));  // the set has landed
  CHECK(modern->ask(Msg(Op::get).str("/shared"), 17) == bytes("from 1.13"));
}

TEST_CASE("store server: a request split into single bytes is still answered") {
  Server s;
  RawSocket c(s.port());
  std::string request = store_bytes::validate() + std::string(Msg(Op::add).str("/slow").i64(3));
  for (char byte : request) REQUIRE(c.send(std::string(1, byte)));
  CHECK(c.recv(8) == i64(3));
}

TEST_CASE("store server: pipelined requests are answered in order") {
  // 20,000 in one burst: more than one read, and replies past the socket buffer.
  const int count = GENERATE(100, 20000);
  Server s;
  RawSocket c(s.port());
  Msg all(Op::validate);
  all.u32(wire::kValidateMagic);
  for (int i = 1; i <= count; ++i) all.then(Msg(Op::add).str("/p").i64(1));
  REQUIRE(c.send(all));
  for (int i = 1; i <= count; ++i) REQUIRE(c.recv(8) == i64(i));
}

TEST_CASE("store server: garbage closes only that connection") {
  Server s;
  auto good = modern_client(s.port());

  RawSocket bad_opcode(s.port());
  CHECK(bad_opcode.send(store_bytes::validate() + std::string(Msg(0xEE).str("junk"))));
  CHECK(bad_opcode.closed_by_server());

  RawSocket bad_magic(s.port());
  CHECK(bad_magic.send(Msg(Op::ping).u32(1).then(Msg(Op::validate).u32(0xBADBAD))));
  CHECK(bad_magic.closed_by_server());

  RawSocket noise(s.port());
  CHECK(noise.send(std::string("\xff\xfe garbage \x01\x02\x03", 14)));
  CHECK(noise.closed_by_server());

  CHECK(good->ask(Msg(Op::add).str("/alive").i64(1), 8) == i64(1));
}

TEST_CASE("store server: an over-limit key closes the connection before its bytes") {
  Server s;
  auto good = modern_client(s.port());
  auto c = modern_client(s.port());
  // Only the length: the server must not wait for 8 KiB + 1 bytes.
  CHECK(c->send(Msg(Op::set).u64(wire::kMaxKeyBytes + 1)));
  CHECK(c->closed_by_server());
  auto d = modern_client(s.port());
  CHECK(d->send(Msg(Op::wait).u64(wire::kMaxKeysPerOp + 1)));
  CHECK(d->closed_by_server());
  CHECK(good->ask(Msg(Op::get_num_keys), 8) == i64(0));
}

TEST_CASE("store server: WAIT is woken by a SET from another connection") {
  Server s;
  auto waiter = modern_client(s.port());
  auto setter = modern_client(s.port());
  // Like torch's servers, a pending WAIT does not hold back the requests
  // after it (CANCEL_WAIT must get through), so clients send GET only once
  // STOP_WAITING arrived.
  CHECK(waiter->send(Msg(Op::wait).keys({"/late"})));
  CHECK(waiter->silent_for(100));
  CHECK(setter->send(Msg(Op::set).str("/late").str("here")));
  CHECK(waiter->recv(1) == store_bytes::kStopWaiting);
  CHECK(waiter->ask(Msg(Op::get).str("/late"), 12) == bytes("here"));

  RawSocket legacy_waiter(s.port());
  CHECK(legacy_waiter.send(Msg(LegacyOp::wait).keys({"/a", "/b"})));
  CHECK(setter->send(Msg(Op::set).str("/a").str("1")));
  CHECK(legacy_waiter.silent_for(100));
  CHECK(setter->ask(Msg(Op::add).str("/b").i64(1), 8) == i64(1));
  CHECK(legacy_waiter.recv(1) == store_bytes::kStopWaiting);
}

TEST_CASE("store server: CANCEL_WAIT answers and nothing follows") {
  Server s;
  auto waiter = modern_client(s.port());
  auto setter = modern_client(s.port());
  CHECK(waiter->send(Msg(Op::wait).keys({"/never"})));
  CHECK(waiter->silent_for(50));
  CHECK(waiter->ask(Msg(Op::cancel_wait), 1) == store_bytes::kWaitCanceled);
  CHECK(setter->send(Msg(Op::set).str("/never").str("now")));
  CHECK(setter->ask(Msg(Op::get_num_keys), 8) == i64(1));
  CHECK(waiter->silent_for(100));
  CHECK(waiter->ask(Msg(Op::ping).u32(5), 4) == store_bytes::u32(5));
}

TEST_CASE("store server: a legacy WAIT given up on sends nothing later") {
  Server s;
  RawSocket c(s.port());
  RawSocket setter(s.port());
  // 1.13 times out client-side, then its next get re-sends WAIT on another key.
  CHECK(c.send(Msg(LegacyOp::wait).keys({"/gave_up"})));
  CHECK(c.silent_for(50));
  CHECK(setter.send(Msg(LegacyOp::set).str("/there").str("x")));
  CHECK(c.ask(Msg(LegacyOp::wait).keys({"/there"}).then(Msg(LegacyOp::get).str("/there")), 10) ==
        store_bytes::kStopWaiting + bytes("x"));
  CHECK(setter.ask(Msg(LegacyOp::add).str("/gave_up").i64(1), 8) == i64(1));
  CHECK(c.silent_for(100));
}

TEST_CASE("store server: a thousand concurrent connections") {
  constexpr int kClients = 1000;
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < 2 * kClients + 100) {
    WARN("skipped: RLIMIT_NOFILE " << limit.rlim_cur << " is too low");
    return;
  }
  Server s;
  std::vector<std::unique_ptr<RawSocket>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(std::make_unique<RawSocket>(s.port()));
  // All of them wait on one key at once, then one SET releases them all.
  for (int i = 0; i < kClients; ++i)
    REQUIRE(clients[i]->send(i % 2 ? std::string(Msg(LegacyOp::wait).keys({"/go"}))
                                   : store_bytes::validate() +
                                         std::string(Msg(Op::wait).keys({"/go"}))));
  auto setter = modern_client(s.port());
  REQUIRE(setter->send(Msg(Op::set).str("/go").str("1")));
  for (auto& c : clients) REQUIRE(c->recv(1) == store_bytes::kStopWaiting);
  for (int i = 0; i < kClients; ++i)
    REQUIRE(clients[i]->send(i % 2 ? std::string(Msg(LegacyOp::add).str("/n").i64(1))
                                   : std::string(Msg(Op::add).str("/n").i64(1))));
  for (auto& c : clients) c->recv(8);
  CHECK(setter->ask(Msg(Op::add).str("/n").i64(0), 8) == i64(kClients));
}

TEST_CASE("store server: stop is prompt and closes every connection") {
  auto server = std::make_unique<BackgroundStoreServer>(StoreServerOptions{"127.0.0.1", 0});
  auto waiter = modern_client(server->port());
  CHECK(waiter->send(Msg(Op::wait).keys({"/never"})));
  RawSocket idle(server->port());
  auto start = std::chrono::steady_clock::now();
  server->stop();
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  CHECK(waiter->closed_by_server());
  CHECK(idle.closed_by_server());
  server->stop();  // idempotent
  server.reset();
}
