// The server's limits (docs/store-protocol.md §5): its memory budget over all
// connections, and the value limit a server may set. Raw sockets, real server.
#include <catch2/catch.hpp>
#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "raw_socket.h"
#include "store/server.h"
#include "store_wire_bytes.h"

using namespace cxxrun::store;
using namespace store_bytes;

namespace {

constexpr size_t kKiB = 1024;
constexpr size_t kMiB = 1024 * 1024;

BackgroundStoreServer with_limit(size_t memory_limit, size_t max_value_bytes = wire::kMaxValueBytes) {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.memory_limit = memory_limit;
  options.max_value_bytes = max_value_bytes;
  return BackgroundStoreServer(options);
}

// The server reads on its own thread: wait until its buffers hold `bytes`.
void wait_for_held(const BackgroundStoreServer& server, size_t bytes) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server.memory_held() < bytes && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  INFO("held " << server.memory_held() << ", waited for " << bytes);
  REQUIRE(server.memory_held() >= bytes);
}

// A modern MULTI_SET announcing 7 values of 8 MiB (56 MiB), and `sent` bytes
// of the first value: a client that stalls mid-request.
std::unique_ptr<RawSocket> stalled_multi_set(int port, size_t sent) {
  auto s = std::make_unique<RawSocket>(port);
  REQUIRE(s->send(store_bytes::validate() + std::string(Msg(Op::multi_set).u64(7).str("/k").u64(8 * kMiB)) +
                  std::string(sent, 'x')));
  return s;
}

bool answers(int port) {
  RawSocket c(port);
  return c.ask(Msg(LegacyOp::add).str("/alive").i64(1), 8).size() == 8;
}

}  // namespace

TEST_CASE("store budget: an announced request reserves nothing it has not received") {
  // 20 clients announce 8 MiB values and send 100 bytes each: 160 MiB
  // announced against a 1 MiB budget. Nobody is closed, and what the server
  // holds is what arrived (rounded up), not what was announced.
  BackgroundStoreServer server = with_limit(1 * kMiB);
  std::vector<std::unique_ptr<RawSocket>> clients;
  for (int i = 0; i < 20; ++i) {
    clients.push_back(std::make_unique<RawSocket>(server.port()));
    REQUIRE(clients.back()->send(std::string(Msg(LegacyOp::set).str("/k").u64(8 * kMiB)) + std::string(100, 'y')));
  }
  wait_for_held(server, 20 * 119);
  CHECK(server.memory_held() < 20 * 256);
  CHECK(answers(server.port()));
  for (auto& c : clients) CHECK(c->silent_for(10));
}

TEST_CASE("store budget: passing it closes the connection holding the most") {
  // Input buffers double: 1.5 MiB received is a 2 MiB buffer, 0.75 MiB a
  // 1 MiB one. A (2 MiB) and B (1 MiB) fit under the limit; C growing to
  // 1 MiB would pass it, so A, the largest, is closed and C carries on.
  BackgroundStoreServer server = with_limit(4 * kMiB - kKiB);
  auto a = stalled_multi_set(server.port(), 1536 * kKiB);
  wait_for_held(server, 2 * kMiB);
  auto b = stalled_multi_set(server.port(), 768 * kKiB);
  wait_for_held(server, 3 * kMiB);
  auto c = stalled_multi_set(server.port(), 768 * kKiB);
  CHECK(a->closed_by_server());
  CHECK(b->silent_for(100));
  CHECK(c->silent_for(10));
  CHECK(server.memory_held() <= 4 * kMiB - kKiB);
  CHECK(server.memory_held() >= 2 * kMiB);
  CHECK(answers(server.port()));
}

TEST_CASE("store budget: a request alone larger than the budget closes its own connection") {
  BackgroundStoreServer server = with_limit(1 * kMiB);
  RawSocket idle(server.port());
  auto big = stalled_multi_set(server.port(), 2 * kMiB);
  CHECK(big->closed_by_server());
  CHECK(idle.silent_for(10));
  CHECK(answers(server.port()));
  // Its memory was given back.
  CHECK(server.memory_held() < 64 * kKiB);
}

TEST_CASE("store budget: replies count too") {
  BackgroundStoreServer server = with_limit(3 * kMiB);
  RawSocket writer(server.port());
  const std::string value(kMiB, 'v');
  for (const char* key : {"/a", "/b", "/c"}) REQUIRE(writer.send(Msg(LegacyOp::set).str(key).str(value)));
  REQUIRE(writer.ask(Msg(LegacyOp::get_num_keys), 8) == i64(3));
  auto reader = std::make_unique<RawSocket>(server.port());
  REQUIRE(reader->send(store_bytes::validate()));
  // One key's reply (1 MiB) fits; three at once (3 MiB) cannot be queued.
  CHECK(reader->ask(Msg(Op::multi_get).keys({"/a"}), 8 + kMiB) == bytes(value));
  REQUIRE(reader->send(Msg(Op::multi_get).keys({"/a", "/b", "/c"})));
  CHECK(reader->closed_by_server());
  CHECK(writer.ask(Msg(LegacyOp::get_num_keys), 8) == i64(3));
}

TEST_CASE("store budget: closed and finished connections give their memory back") {
  BackgroundStoreServer server = with_limit(64 * kMiB);
  {
    auto stalled = stalled_multi_set(server.port(), 4 * kMiB);
    wait_for_held(server, 4 * kMiB);
  }
  // A whole 4 MiB request, answered: its buffer goes too.
  RawSocket c(server.port());
  REQUIRE(c.send(Msg(LegacyOp::set).str("/big").str(std::string(4 * kMiB, 'z'))));
  REQUIRE(c.ask(Msg(LegacyOp::get_num_keys), 8) == i64(1));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (server.memory_held() >= 64 * kKiB && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK(server.memory_held() < 64 * kKiB);
}

TEST_CASE("store server: the value limit is the server's to set") {
  BackgroundStoreServer server = with_limit(wire::kDefaultMemoryLimit, 16 * kMiB);
  RawSocket c(server.port());
  REQUIRE(c.send(Msg(LegacyOp::set).str("/nine").str(std::string(9 * kMiB, 'n'))));
  CHECK(c.ask(Msg(LegacyOp::get_num_keys), 8) == i64(1));
  REQUIRE(c.send(Msg(LegacyOp::set).str("/over").u64(16 * kMiB + 1)));
  CHECK(c.closed_by_server());

  BackgroundStoreServer torchs = with_limit(wire::kDefaultMemoryLimit);
  RawSocket d(torchs.port());
  REQUIRE(d.send(Msg(LegacyOp::set).str("/nine").u64(9 * kMiB)));
  CHECK(d.closed_by_server());
}

TEST_CASE("store server: limits out of range are refused at construction") {
  CHECK_THROWS_AS(with_limit(0), std::invalid_argument);
  CHECK_THROWS_AS(with_limit(kMiB, 0), std::invalid_argument);
  CHECK_THROWS_AS(with_limit(kMiB, wire::kMaxRequestBytes + 1), std::invalid_argument);
}

TEST_CASE("store budget: stalled requests are closed before a large one that is still arriving") {
  // Sixteen clients stall mid-request (512 KiB buffers each, 8 MiB in all);
  // then a legitimate 3 MiB SET arrives against a 10 MiB budget. It holds
  // the most, but it is moving: stalled ones go, and it is answered (it
  // closed itself before).
  BackgroundStoreServer server = with_limit(10 * kMiB);
  std::vector<std::unique_ptr<RawSocket>> stalled;
  for (int i = 0; i < 16; ++i) {
    stalled.push_back(stalled_multi_set(server.port(), 384 * kKiB));
    wait_for_held(server, (i + 1) * 512 * kKiB);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // past kStalledAfter
  RawSocket big(server.port());
  REQUIRE(big.send(Msg(LegacyOp::set).str("/big").str(std::string(3 * kMiB, 'z'))));
  CHECK(big.ask(Msg(LegacyOp::get_num_keys), 8) == i64(1));
  // Something arrived (the server's close, as nothing else is sent them).
  int closed = 0;
  for (auto& s : stalled) closed += !s->silent_for(0) && s->closed_by_server() ? 1 : 0;
  CHECK(closed >= 1);
}
