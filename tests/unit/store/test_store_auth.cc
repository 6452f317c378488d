// The store's shared secret (docs/store-protocol.md §9): the pure handshake
// gate, its cryptography, token files, and a real server and client.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <thread>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>

#include "raw_socket.h"
#include "scripted_store_server.h"
#include "store/auth.h"
#include "store/auth_gate.h"
#include "store/client.h"
#include "store/server.h"
#include "store_wire_bytes.h"

using namespace cxxrun::store;
using namespace std::chrono_literals;
using Status = AuthGate::Status;
using store_bytes::i64;
using store_bytes::LegacyOp;
using store_bytes::Msg;
using store_bytes::Op;

namespace {

const std::string kToken = "secret";
const std::string kNonce(32, '\x01');
std::string fixed_nonce() { return kNonce; }

std::string auth_begin(uint32_t version = wire::kAuthVersion) { return Msg(wire::AuthOp::begin).u32(version); }
std::string auth_prove(const std::string& mac) { return Msg(wire::AuthOp::prove).str(mac); }
const std::string kOk(1, '\0');
const std::string kRefused(1, '\1');

BackgroundStoreServer server_with(const std::string& token) {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.token = token;
  return BackgroundStoreServer(options);
}

StoreClient::Options client_options(int port, const std::string& token, Protocol protocol = Protocol::modern) {
  StoreClient::Options o;
  o.port = port;
  o.token = token;
  o.protocol = protocol;
  o.timeout = 5000ms;
  return o;
}

// A raw client through the handshake with `token`; returns the server's verdict byte.
std::string raw_handshake(RawSocket& c, const std::string& token) {
  std::string nonce_reply = c.ask(auth_begin(), 8 + auth::kNonceBytes);
  REQUIRE(nonce_reply.substr(0, 8) == Msg().u64(auth::kNonceBytes).bytes());
  return c.ask(auth_prove(auth::proof(token, nonce_reply.substr(8))), 1);
}

std::string write_file(const std::string& name, const std::string& content) {
  std::string path = "/tmp/cxxrun_test_token_" + std::to_string(getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

}  // namespace

TEST_CASE("store auth: the proof is HMAC-SHA256 over the label and the nonce") {
  // Python: hmac.new(b"secret", b"cxxrun-store-auth-v1" + bytes([1]) * 32, hashlib.sha256).hexdigest()
  CHECK(scripted::hex(auth::proof(kToken, kNonce)) ==
        "9c1b7c127bce32048c4d636187d39929944f29fceded6caae1bcf52a68f7efda");
  CHECK(auth::proof_matches(kToken, kNonce, auth::proof(kToken, kNonce)));
  CHECK_FALSE(auth::proof_matches("Secret", kNonce, auth::proof(kToken, kNonce)));
  CHECK_FALSE(auth::proof_matches(kToken, kNonce, auth::proof(kToken, kNonce).substr(0, 31)));
  CHECK_FALSE(auth::proof_matches(kToken, kNonce, ""));
  std::string a = auth::make_nonce(), b = auth::make_nonce();
  CHECK(a.size() == auth::kNonceBytes);
  CHECK(a != b);
}

TEST_CASE("store auth: the gate lets a right proof through") {
  AuthGate gate(kToken);
  CHECK_FALSE(gate.open());
  AuthGate::Step s = gate.step(auth_begin().substr(0, 3), fixed_nonce);
  CHECK(s.status == Status::need_more);
  CHECK(s.needed == 5);
  s = gate.step(auth_begin(), fixed_nonce);
  REQUIRE(s.status == Status::reply);
  CHECK(s.consumed == 5);
  CHECK(s.reply == Msg().str(kNonce).bytes());
  const std::string proof = auth_prove(auth::proof(kToken, kNonce));
  s = gate.step(proof.substr(0, 9), fixed_nonce);
  CHECK(s.status == Status::need_more);
  CHECK(s.needed == 41);
  // The proof may come with the first requests behind it.
  s = gate.step(proof + store_bytes::validate(), fixed_nonce);
  REQUIRE(s.status == Status::reply);
  CHECK(s.consumed == 41);
  CHECK(s.reply == kOk);
  CHECK(gate.open());
}

TEST_CASE("store auth: the gate refuses a wrong proof, with an answer") {
  AuthGate gate(kToken);
  REQUIRE(gate.step(auth_begin(), fixed_nonce).status == Status::reply);
  AuthGate::Step s = gate.step(auth_prove(auth::proof("wrong", kNonce)), fixed_nonce);
  CHECK(s.status == Status::refuse);
  CHECK(s.reply == kRefused);
  CHECK(s.error == "authentication failed: wrong token");
  CHECK_FALSE(gate.open());
}

TEST_CASE("store auth: the gate refuses anything but the handshake, from its first bytes") {
  auto refused = [](const std::string& bytes) {
    AuthGate gate(kToken);
    AuthGate::Step s = gate.step(bytes, fixed_nonce);
    INFO(scripted::hex(bytes));
    CHECK(s.status == Status::refuse);
    CHECK(s.reply.empty());
    return s.error;
  };
  // torch 1.13's first request (legacy ADD init/ 1), torch 2.x's VALIDATE.
  CHECK_THAT(refused(Msg(LegacyOp::add).str("init/").i64(1)), Catch::StartsWith("not authenticated"));
  CHECK_THAT(refused(store_bytes::validate()), Catch::Contains("opcode 0 instead of AUTH"));
  CHECK_THAT(refused(auth_prove(std::string(32, 'x'))), Catch::StartsWith("not authenticated"));
  CHECK_THAT(refused(auth_begin(2)), Catch::Contains("AUTH version 2"));

  AuthGate gate(kToken);
  REQUIRE(gate.step(auth_begin(), fixed_nonce).status == Status::reply);
  // A proof of the wrong length is refused from its length alone.
  AuthGate::Step s = gate.step(Msg(wire::AuthOp::prove).u64(1 << 30).bytes(), fixed_nonce);
  CHECK(s.status == Status::refuse);
  CHECK_THAT(s.error, Catch::Contains("1073741824 bytes"));
  AuthGate again(kToken);
  REQUIRE(again.step(auth_begin(), fixed_nonce).status == Status::reply);
  CHECK(again.step(Msg(LegacyOp::get_num_keys).bytes(), fixed_nonce).status == Status::refuse);
}

TEST_CASE("store auth: without a token the gate opens at once, and says so to a client that asks") {
  AuthGate plain("");
  bool asked = false;
  auto nonce = [&] {
    asked = true;
    return kNonce;
  };
  AuthGate::Step s = plain.step(Msg(LegacyOp::get_num_keys).bytes(), nonce);
  CHECK(s.status == Status::open);
  CHECK(s.consumed == 0);
  CHECK(plain.open());

  AuthGate asking("");
  s = asking.step(auth_begin(), nonce);
  REQUIRE(s.status == Status::reply);
  CHECK(s.consumed == 5);
  CHECK(s.reply == Msg().u64(0).bytes());  // an empty nonce: no token here
  CHECK(asking.open());
  CHECK_FALSE(asked);
}

TEST_CASE("store auth: token files") {
  CHECK(auth::read_token_file(write_file("plain", "abc")) == "abc");
  CHECK(auth::read_token_file(write_file("newline", "abc\n")) == "abc");
  CHECK(auth::read_token_file(write_file("crlf", "abc\r\n")) == "abc");
  CHECK(auth::read_token_file(write_file("two", "abc\n\n")) == "abc\n");  // one newline only
  CHECK(auth::read_token_file(write_file("binary", std::string("a\0b", 3))) == std::string("a\0b", 3));
  const std::string empty = write_file("empty", "");
  CHECK_THROWS_WITH(auth::read_token_file(empty), "the token file " + empty + " is empty");
  CHECK_THROWS_WITH(auth::read_token_file(write_file("only_newline", "\n")), Catch::EndsWith("is empty"));
  CHECK_THROWS_WITH(auth::read_token_file("/nonexistent/token"),
                    "cannot read the token file /nonexistent/token: No such file or directory");
  CHECK_THROWS_WITH(auth::read_token_file("/tmp"), Catch::Contains("is a directory"));
  for (const char* name : {"plain", "newline", "crlf", "two", "binary", "empty", "only_newline"})
    std::remove(("/tmp/cxxrun_test_token_" + std::to_string(getpid()) + "_" + name).c_str());
}

TEST_CASE("store auth: a server with a token serves a client that proves it") {
  BackgroundStoreServer server = server_with(kToken);
  RawSocket c(server.port());
  REQUIRE(raw_handshake(c, kToken) == kOk);
  CHECK(c.ask(Msg(LegacyOp::add).str("/n").i64(2), 8) == i64(2));

  for (Protocol protocol : {Protocol::modern, Protocol::legacy}) {
    auto client = StoreClient::connect(client_options(server.port(), kToken, protocol));
    client->set("k", "v");
    CHECK(client->get("k") == "v");
    CHECK(client->add("n", 1) == (protocol == Protocol::modern ? 3 : 4));
  }
}

TEST_CASE("store auth: a wrong token is refused at once, and says so") {
  BackgroundStoreServer server = server_with(kToken);
  RawSocket c(server.port());
  CHECK(raw_handshake(c, "wrong") == kRefused);
  CHECK(c.closed_by_server());

  auto start = std::chrono::steady_clock::now();
  try {
    StoreClient::connect(client_options(server.port(), "wrong"));
    FAIL("connected with a wrong token");
  } catch (const StoreAuthError& e) {
    CHECK_THAT(e.what(), Catch::Contains("authentication failed") && Catch::Contains("refused"));
    CHECK_THAT(e.what(), Catch::Contains("127.0.0.1:" + std::to_string(server.port())));
  }
  CHECK(std::chrono::steady_clock::now() - start < 1s);  // not retried until the deadline
}

TEST_CASE("store auth: without the token every request is refused, torch's included") {
  BackgroundStoreServer server = server_with(kToken);
  // torch 1.13's client: its first request, no handshake. Nothing comes back.
  RawSocket legacy(server.port());
  REQUIRE(legacy.send(Msg(LegacyOp::add).str("init/").i64(1)));
  CHECK(legacy.closed_by_server());
  // torch 2.x's client: VALIDATE + PING.
  RawSocket modern(server.port());
  REQUIRE(modern.send(store_bytes::validate() + std::string(Msg(Op::ping).u32(7))));
  CHECK(modern.closed_by_server());
  // cxxrun's own client without the token: a dropped handshake, with a
  // hint, and a refusal a caller that waits for the store stops at.
  auto start = std::chrono::steady_clock::now();
  try {
    StoreClient::connect(client_options(server.port(), ""));
    FAIL("connected without the token");
  } catch (const StoreRefused& e) {
    CHECK_THAT(e.what(), Catch::Contains("a store with a token refuses clients without it"));
    CHECK_THAT(e.what(), Catch::Contains("3 connections in a row"));
  }
  CHECK(std::chrono::steady_clock::now() - start < 3s);
  // Nothing reached the store.
  RawSocket c(server.port());
  REQUIRE(raw_handshake(c, kToken) == kOk);
  CHECK(c.ask(Msg(LegacyOp::get_num_keys), 8) == i64(0));
}

TEST_CASE("store auth: a connection that never answers the challenge is closed at the deadline") {
  StoreServerOptions options;
  options.host = "127.0.0.1";
  options.token = kToken;
  options.auth_deadline = 200ms;
  BackgroundStoreServer server(options);
  RawSocket silent(server.port());
  CHECK(silent.silent_for(50));  // kept while the deadline runs
  CHECK_FALSE(silent.silent_for(5000));
  CHECK(silent.closed_by_server());
  // One that proved itself stays, however long it is idle after.
  auto client = StoreClient::connect(client_options(server.port(), kToken));
  std::this_thread::sleep_for(400ms);
  client->set("k", "v");
  CHECK(client->get("k") == "v");

  // Without a token there is nothing to prove: torch's clients may sit idle.
  options.token.clear();
  BackgroundStoreServer open(options);
  RawSocket idle(open.port());
  CHECK(idle.silent_for(500));
}

TEST_CASE("store auth: a token-less server is unchanged, and tells a token holder it takes none") {
  BackgroundStoreServer server = server_with("");
  RawSocket legacy(server.port());
  CHECK(legacy.ask(Msg(LegacyOp::add).str("init/").i64(1), 8) == i64(1));
  auto plain = StoreClient::connect(client_options(server.port(), ""));
  CHECK(plain->add("init/", 0) == 0);  // the client adds its "/" prefix: another key

  auto start = std::chrono::steady_clock::now();
  try {
    StoreClient::connect(client_options(server.port(), kToken));
    FAIL("authenticated to a server without a token");
  } catch (const StoreAuthError& e) {
    CHECK_THAT(e.what(), Catch::Contains("authentication failed: the store takes no token"));
  }
  CHECK(std::chrono::steady_clock::now() - start < 1s);
}

TEST_CASE("store auth: a server that drops AUTH is an authentication error, after three tries") {
  // torch's servers do not know the opcode and close the connection.
  scripted::Server torchlike(3, [](const scripted::Socket& sock, int) {
    scripted::expect(sock, "c0 01000000");
  });
  auto start = std::chrono::steady_clock::now();
  try {
    StoreClient::connect(client_options(torchlike.port, kToken));
    FAIL("authenticated to a server that drops AUTH");
  } catch (const StoreAuthError& e) {
    CHECK_THAT(e.what(), Catch::Contains("authentication failed") && Catch::Contains("3 connections in a row"));
  }
  CHECK(std::chrono::steady_clock::now() - start < 3s);
  torchlike.join();
  for (const auto& e : torchlike.errors) FAIL(e);
}
