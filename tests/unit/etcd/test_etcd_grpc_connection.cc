// GrpcConnection against the fake gRPC server: what a call sends and what
// it makes of every shape of answer, the deadline and interrupt, and the
// kept-alive connection a member closed or sent GOAWAY on while idle.
#include "etcd/grpc_connection.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "fake_grpc_server.h"
#include "listener.h"

using namespace cxxrun::etcd;
using namespace std::chrono_literals;
using ErrorKind = TransportError::Kind;

namespace {

constexpr char kRangeMethod[] = "/etcdserverpb.KV/Range";
constexpr char kWatchMethod[] = "/etcdserverpb.Watch/Watch";

Endpoint endpoint_of(const FakeGrpcServer& server) { return {"127.0.0.1", server.port()}; }

GrpcResponse call(GrpcConnection& c, const GrpcRequest& request, std::chrono::milliseconds within = 10s) {
  return c.call(request, Clock::now() + within, Clock::now() + within);
}

GrpcResponse open_watch(GrpcConnection& c, const GrpcRequest& request) {
  return c.open_stream(request, Clock::now() + 10s, Clock::now() + 10s);
}

// The error a call throws; fails the test when it returns instead.
template <class F>
TransportError thrown_by(F&& f) {
  try {
    f();
  } catch (const TransportError& e) {
    return e;
  }
  FAIL("no TransportError");
  throw;
}

FakeGrpcServer::Answer echo(const FakeGrpcServer::Call& c) { return FakeGrpcServer::ok("got " + c.message); }

}  // namespace

TEST_CASE("grpc connection: a unary call carries the method, message and metadata, and reads the answer",
          "[etcd][grpc]") {
  FakeGrpcServer server(echo);
  GrpcConnection c(endpoint_of(server), nullptr);
  auto r = call(c, {kRangeMethod, std::string("k\0ey", 4), "tok-1"});
  CHECK(r.status.code == 0);
  CHECK(r.message == "got " + std::string("k\0ey", 4));
  r = call(c, {kRangeMethod, "second", ""});
  CHECK(r.message == "got second");
  auto calls = server.calls();
  REQUIRE(calls.size() == 2);
  CHECK(calls[0].method == kRangeMethod);
  CHECK(calls[0].message == std::string("k\0ey", 4));
  CHECK(calls[0].token == "tok-1");
  CHECK(calls[0].hasleader == "true");
  CHECK(calls[1].token.empty());
  // The connection is kept alive between calls.
  CHECK(calls[1].connection == 1);
  CHECK(server.connections() == 1);
}

TEST_CASE("grpc connection: an answer larger than the windows arrives whole", "[etcd][grpc]") {
  std::string big(20 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + i / 4096);
  FakeGrpcServer server([&](const FakeGrpcServer::Call&) { return FakeGrpcServer::ok(big); });
  GrpcConnection c(endpoint_of(server), nullptr);
  auto r = call(c, {kRangeMethod, "all", ""}, 60s);
  CHECK(r.status.code == 0);
  REQUIRE(r.message.size() == big.size());
  CHECK(r.message == big);
}

TEST_CASE("grpc connection: a message split across DATA frames, and several in one frame", "[etcd][grpc]") {
  FakeGrpcServer server([](const FakeGrpcServer::Call& c) {
    if (c.method == kWatchMethod) return FakeGrpcServer::stream({"one", "two two", "three three three"});
    FakeGrpcServer::Answer a = FakeGrpcServer::ok("a message in many small DATA frames");
    a.data_frame = 3;  // the 5-byte gRPC header itself is split
    return a;
  });
  GrpcConnection c(endpoint_of(server), nullptr);
  CHECK(call(c, {kRangeMethod, "x", ""}).message == "a message in many small DATA frames");

  GrpcConnection watch(endpoint_of(server), nullptr);
  REQUIRE(open_watch(watch, {kWatchMethod, "w", ""}).status.code == 0);
  std::vector<std::string> got;
  for (int i = 0; i < 3; ++i) {
    std::string out;
    REQUIRE(watch.read_message(out, Clock::now() + 10s));
    got.push_back(out);
  }
  CHECK(got == std::vector<std::string>{"one", "two two", "three three three"});
}

TEST_CASE("grpc connection: refusals come back as statuses", "[etcd][grpc]") {
  FakeGrpcServer::Answer answer;
  FakeGrpcServer server([&](const FakeGrpcServer::Call&) { return answer; });
  GrpcConnection c(endpoint_of(server), nullptr);

  SECTION("trailers-only") {
    answer = FakeGrpcServer::error(14, "etcdserver: no leader");
    auto r = call(c, {kRangeMethod, "x", ""});
    CHECK(r.status.code == 14);
    CHECK(r.status.message == "etcdserver: no leader");
    CHECK(r.message.empty());
  }
  SECTION("an HTTP status other than 200, as gRPC maps it") {
    answer.http_status = 503;
    auto r = call(c, {kRangeMethod, "x", ""});
    CHECK(r.status.code == 14);
    CHECK(r.status.message == "HTTP 503");
    answer.http_status = 401;
    CHECK(call(c, {kRangeMethod, "x", ""}).status.code == 16);
  }
  SECTION("grpc-message percent-decoded") {
    const std::string text = "100% sure: na\xc3\xafve\nsecond line";
    answer = FakeGrpcServer::error(3, text);
    CHECK(call(c, {kRangeMethod, "x", ""}).status.message == text);
  }
  SECTION("a status after messages, in the trailers") {
    answer = FakeGrpcServer::ok("ignored");
    answer.code = 9;
    answer.message = "failed precondition";
    auto r = call(c, {kRangeMethod, "x", ""});
    CHECK(r.status.code == 9);
    CHECK(r.status.message == "failed precondition");
  }
}

TEST_CASE("grpc connection: a unary answer of other than one message is lost", "[etcd][grpc]") {
  FakeGrpcServer::Answer answer;
  FakeGrpcServer server([&](const FakeGrpcServer::Call&) { return answer; });
  GrpcConnection c(endpoint_of(server), nullptr);
  answer.messages = {"a", "b"};
  auto e = thrown_by([&] { call(c, {kRangeMethod, "x", ""}); });
  CHECK(e.kind == ErrorKind::lost);
  CHECK(e.sent);
  CHECK(std::string(e.what()) == "the answer carried 2 messages, not one");
  answer.messages = {};
  e = thrown_by([&] { call(c, {kRangeMethod, "x", ""}); });
  CHECK(std::string(e.what()) == "the answer carried 0 messages, not one");
}

TEST_CASE("grpc connection: the member resetting the stream loses the call; refusing it does not", "[etcd][grpc]") {
  FakeGrpcServer::Answer answer;
  FakeGrpcServer server([&](const FakeGrpcServer::Call&) { return answer; });
  GrpcConnection c(endpoint_of(server), nullptr);
  answer.reset = 2;  // INTERNAL_ERROR
  auto e = thrown_by([&] { call(c, {kRangeMethod, "x", ""}); });
  CHECK(e.kind == ErrorKind::lost);
  CHECK(e.sent);
  CHECK(std::string(e.what()) == "the member reset the stream (HTTP/2 error code 2)");
  answer.reset = 7;  // REFUSED_STREAM: not acted on
  e = thrown_by([&] { call(c, {kRangeMethod, "x", ""}); });
  CHECK(e.kind == ErrorKind::lost);
  CHECK_FALSE(e.sent);
}

TEST_CASE("grpc connection: no answer by the deadline is a timeout, the request sent", "[etcd][grpc]") {
  bool answer = false;
  FakeGrpcServer server([&](const FakeGrpcServer::Call&) {
    return answer ? FakeGrpcServer::ok("late") : FakeGrpcServer::stream();  // headers, never a message
  });
  GrpcConnection c(endpoint_of(server), nullptr);
  auto e = thrown_by([&] { call(c, {kRangeMethod, "x", ""}, 300ms); });
  CHECK(e.kind == ErrorKind::timeout);
  CHECK(e.sent);
  answer = true;
  CHECK(call(c, {kRangeMethod, "x", ""}).message == "late");
}

TEST_CASE("grpc connection: a refused connect is unreachable, nothing sent", "[etcd][grpc]") {
  int port = 0;
  {
    Listener gone;
    port = gone.port;
  }
  GrpcConnection c({"127.0.0.1", port}, nullptr);
  auto e = thrown_by([&] { call(c, {kRangeMethod, "x", ""}); });
  CHECK(e.kind == ErrorKind::unreachable);
  CHECK_FALSE(e.sent);
  CHECK(std::string(e.what()) == "Connection refused");
}

TEST_CASE("grpc connection: the member closing the connection mid-call loses it", "[etcd][grpc]") {
  FakeGrpcServer server([](const FakeGrpcServer::Call&) {
    FakeGrpcServer::Answer a;
    a.close = true;
    return a;
  });
  GrpcConnection c(endpoint_of(server), nullptr);
  auto e = thrown_by([&] { call(c, {kRangeMethod, "x", ""}); });
  CHECK(e.kind == ErrorKind::lost);
  CHECK(e.sent);
  // A close with our bytes unread is a reset, not an end of stream.
  const std::string what = e.what();
  CHECK((what == "reading the answer: the member closed the connection" ||
         what == "reading the answer: Connection reset by peer"));
}

TEST_CASE("grpc connection: a connection the member ended while idle is replaced, the request not lost",
          "[etcd][grpc]") {
  FakeGrpcServer server(echo);
  GrpcConnection c(endpoint_of(server), nullptr);
  REQUIRE(call(c, {kRangeMethod, "1", ""}).message == "got 1");

  SECTION("closed") {
    REQUIRE(server.close_connections() == 1);
    REQUIRE(server.wait_closed(1));
  }
  SECTION("GOAWAY") {
    REQUIRE(server.goaway() == 1);
  }
  CHECK(call(c, {kRangeMethod, "2", ""}).message == "got 2");
  auto calls = server.calls();
  REQUIRE(calls.size() == 2);
  CHECK(calls[1].connection == 2);
}

TEST_CASE("grpc connection: an answer the member sent just before closing is read whole", "[etcd][grpc]") {
  std::string big(3 << 20, 'b');
  FakeGrpcServer server([&](const FakeGrpcServer::Call& c) {
    auto a = FakeGrpcServer::ok(c.message == "big" ? big : "got " + c.message);
    a.close_after = c.connection == 1;
    return a;
  });
  GrpcConnection c(endpoint_of(server), nullptr);
  // Our window updates meet a closed socket (reset) while the answer is
  // still arriving: the answer counts, not the failed write.
  CHECK(call(c, {kRangeMethod, "big", ""}).message == big);
  REQUIRE(server.wait_closed(1));
  CHECK(call(c, {kRangeMethod, "2", ""}).message == "got 2");
  CHECK(server.calls().at(1).connection == 2);
}

TEST_CASE("grpc connection: a PING while idle keeps the connection", "[etcd][grpc]") {
  FakeGrpcServer server(echo);
  GrpcConnection c(endpoint_of(server), nullptr);
  REQUIRE(call(c, {kRangeMethod, "1", ""}).message == "got 1");
  REQUIRE(server.ping() == 1);
  CHECK(call(c, {kRangeMethod, "2", ""}).message == "got 2");
  CHECK(server.connections() == 1);
}

TEST_CASE("grpc connection: a stream's messages, its deadline, and its end with a status", "[etcd][grpc]") {
  FakeGrpcServer server([](const FakeGrpcServer::Call& c) {
    if (c.message == "refuse") return FakeGrpcServer::error(14, "etcdserver: no leader");
    return FakeGrpcServer::stream({"created"});
  });
  GrpcConnection c(endpoint_of(server), nullptr);

  SECTION("refused at once") {
    auto r = open_watch(c, {kWatchMethod, "refuse", ""});
    CHECK(r.status.code == 14);
    CHECK(r.status.message == "etcdserver: no leader");
  }
  SECTION("open") {
    auto r = open_watch(c, {kWatchMethod, "w", "tok"});
    REQUIRE(r.status.code == 0);
    CHECK(server.calls().at(0).token == "tok");
    std::string out;
    REQUIRE(c.read_message(out, Clock::now() + 10s));
    CHECK(out == "created");
    out.clear();
    CHECK_FALSE(c.read_message(out, Clock::now() + 100ms));
    REQUIRE(server.push("event 1") == 1);
    REQUIRE(c.read_message(out, Clock::now() + 10s));
    CHECK(out == "event 1");

    // A deadline already passed takes what has arrived.
    REQUIRE(server.push("event 2") == 1);
    bool got = false;
    for (int i = 0; i < 500 && !got; ++i) {
      out.clear();
      got = c.read_message(out, Clock::now() - 1s);
      if (!got) std::this_thread::sleep_for(10ms);
    }
    REQUIRE(got);
    CHECK(out == "event 2");

    REQUIRE(server.push("event 3") == 1);
    REQUIRE(server.end_streams(11, "etcdserver: mvcc: required revision has been compacted") == 1);
    out.clear();
    REQUIRE(c.read_message(out, Clock::now() + 10s));
    CHECK(out == "event 3");
    auto e = thrown_by([&] { c.read_message(out, Clock::now() + 10s); });
    CHECK(e.kind == ErrorKind::lost);
    REQUIRE(e.status);
    CHECK(e.status->code == 11);
    CHECK(e.status->message == "etcdserver: mvcc: required revision has been compacted");
    CHECK(std::string(e.what()) ==
          "the member ended the stream: status 11 (etcdserver: mvcc: required revision has been compacted)");
  }
}

TEST_CASE("grpc connection: a stream whose connection closes is lost, with no status", "[etcd][grpc]") {
  FakeGrpcServer server([](const FakeGrpcServer::Call&) { return FakeGrpcServer::stream(); });
  GrpcConnection c(endpoint_of(server), nullptr);
  REQUIRE(open_watch(c, {kWatchMethod, "w", ""}).status.code == 0);
  REQUIRE(server.close_connections() == 1);
  std::string out;
  auto e = thrown_by([&] { c.read_message(out, Clock::now() + 10s); });
  CHECK(e.kind == ErrorKind::lost);
  CHECK_FALSE(e.status);
}

TEST_CASE("grpc connection: interrupt() from another thread ends a blocked read", "[etcd][grpc]") {
  FakeGrpcServer server([](const FakeGrpcServer::Call&) { return FakeGrpcServer::stream(); });
  GrpcConnection c(endpoint_of(server), nullptr);
  REQUIRE(open_watch(c, {kWatchMethod, "w", ""}).status.code == 0);
  std::thread interrupter([&] {
    std::this_thread::sleep_for(200ms);
    c.interrupt();
  });
  std::string out;
  // Without the interrupt the read would return false at its deadline.
  auto e = thrown_by([&] { c.read_message(out, Clock::now() + 60s); });
  interrupter.join();
  CHECK(e.kind == ErrorKind::cancelled);
  // And so does every later call.
  CHECK(thrown_by([&] { call(c, {kRangeMethod, "x", ""}); }).kind == ErrorKind::cancelled);
}
