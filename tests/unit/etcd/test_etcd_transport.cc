// The failover, retry and auth rules (etcd/transport.h) against fake
// members that fail on cue: what is sent again, what is not, and what the
// caller is told.
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "etcd/client.h"
#include "etcd/transport.h"
#include "etcd/watch.h"
#include "fake_etcd_member.h"
#include "listener.h"

using namespace cxxrun::etcd;
using namespace std::chrono_literals;
using EtcdMember = FakeEtcdMember;

namespace {

const std::string kHeader = R"("header":{"cluster_id":"1","member_id":"222","revision":"5"})";
const std::string kRange = "{" + kHeader + R"(,"kvs":[{"key":"aw==","value":"dg==","mod_revision":"5"}],"count":"1"})";
const std::string kPut = "{" + kHeader + "}";

std::string transport_refusal(int status, int code, const std::string& message) {
  return EtcdMember::answer(status, R"({"error":")" + message + R"(","message":")" + message +
                                    R"(","code":)" + std::to_string(code) + "}");
}

Client client_of(const std::vector<const EtcdMember*>& members, std::chrono::milliseconds timeout = 5s) {
  cxxrun::etcd::Options o;
  std::vector<std::string> texts;
  for (auto* m : members) texts.push_back(m->endpoint());
  o.endpoints = parse_endpoints(texts, Protocol::http);
  o.timeout = timeout;
  return Client(o);
}

// Answers a put or a range; anything else is a test bug.
std::string serves(const EtcdMember::Request& r) {
  if (r.target == "/v3/kv/range") return EtcdMember::ok(kRange);
  if (r.target == "/v3/kv/put") return EtcdMember::ok(kPut);
  if (r.target == "/v3/maintenance/status") return EtcdMember::ok("{" + kHeader + R"(,"leader":"222"})");
  return EtcdMember::answer(404, "Not Found");
}

}  // namespace

TEST_CASE("etcd transport: a read whose answer was lost is read again from the next member") {
  EtcdMember a([](const EtcdMember::Request&) { return std::string(); });
  EtcdMember b(serves);
  auto c = client_of({&a, &b});
  auto r = c.range("k");
  REQUIRE(r.kv);
  CHECK(r.kv->value == "v");
  CHECK(a.requests().size() == 1);
  CHECK(c.endpoint() == b.endpoint());
}

TEST_CASE("etcd transport: a member that takes requests and never answers is left for the next call") {
  // A member up but stalled (restarting, overloaded): the call that met it
  // runs out, and the next goes elsewhere instead of waiting on it again,
  // or a node's lease beats would fail for as long as it stays silent.
  EtcdMember a([](const EtcdMember::Request&) {
    std::this_thread::sleep_for(300ms);
    return std::string();
  });
  EtcdMember b(serves);
  auto c = client_of({&a, &b}, 200ms);
  CHECK_THROWS_AS(c.range("k"), EtcdTimeout);
  auto r = c.range("k");
  REQUIRE(r.kv);
  CHECK(c.endpoint() == b.endpoint());
  CHECK(a.requests().size() == 1);
}

TEST_CASE("etcd transport: a write whose answer was lost is indeterminate, never sent twice") {
  EtcdMember a([](const EtcdMember::Request&) { return std::string(); });
  EtcdMember b(serves);
  auto c = client_of({&a, &b});
  CHECK_THROWS_AS(c.put("k", "v"), EtcdIndeterminate);
  CHECK_THROWS_WITH(c.txn({}, {Op::put("k", "v")}), Catch::Contains("may or may not have been applied"));
  CHECK(b.requests().empty());
}

TEST_CASE("etcd transport: 'no leader' was not applied: a write moves on") {
  EtcdMember a([](const EtcdMember::Request&) { return transport_refusal(503, 14, "etcdserver: no leader"); });
  EtcdMember b(serves);
  auto c = client_of({&a, &b});
  CHECK(c.put("k", "v") == 5);
  CHECK(a.count("/v3/kv/put") == 1);
  CHECK(b.count("/v3/kv/put") == 1);
}

TEST_CASE("etcd transport: 'request timed out' may have applied: reads retry, writes do not") {
  EtcdMember a([](const EtcdMember::Request&) { return transport_refusal(503, 14, "etcdserver: request timed out"); });
  EtcdMember b(serves);
  auto c = client_of({&a, &b});
  CHECK_THROWS_AS(c.put("k", "v"), EtcdIndeterminate);
  CHECK(b.requests().empty());
  CHECK(c.range("k").kv);
}

TEST_CASE("etcd transport: a refusal is final and names the member") {
  EtcdMember a([](const EtcdMember::Request&) { return transport_refusal(400, 3, "etcdserver: key is not provided"); });
  EtcdMember b(serves);
  auto c = client_of({&a, &b});
  try {
    c.put("", "v");
    FAIL("no error");
  } catch (const EtcdRequestError& e) {
    CHECK(e.grpc_code == 3);
    CHECK(std::string(e.what()) == "etcd " + a.endpoint() + ": put: etcdserver: key is not provided");
  }
  CHECK(b.requests().empty());
}

TEST_CASE("etcd transport: the deadline bounds retries against a member without a leader") {
  EtcdMember a([](const EtcdMember::Request&) { return transport_refusal(503, 14, "etcdserver: no leader"); });
  auto c = client_of({&a}, 300ms);
  auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(c.range("k"), EtcdTimeout);
  auto took = std::chrono::steady_clock::now() - start;
  CHECK(took >= 300ms);
  CHECK(took < 1500ms);
  CHECK_THROWS_WITH(c.range("k"), Catch::Contains("etcdserver: no leader"));
  CHECK(a.requests().size() > 2);  // retried, with backoff
}

TEST_CASE("etcd transport: kept-alive connections, and one the member closed while idle") {
  std::atomic<int> n{0};
  EtcdMember a([&](const EtcdMember::Request& r) {
    // The second answer closes the connection, as a member going away.
    return ++n == 2 ? EtcdMember::kCloseAfter + serves(r) : serves(r);
  });
  auto c = client_of({&a});
  c.range("k");
  c.put("k", "v");
  CHECK(a.connections() == 1);
  std::this_thread::sleep_for(50ms);
  // Found closed before use: a fresh connection, so no indeterminate write.
  CHECK(c.put("k", "v") == 5);
  CHECK(a.connections() == 2);
}

TEST_CASE("etcd transport: an expired token is replaced once") {
  std::atomic<int> tokens{0};
  EtcdMember a([&](const EtcdMember::Request& r) {
    if (r.target == "/v3/auth/authenticate")
      return EtcdMember::ok("{" + kHeader + R"(,"token":"t)" + std::to_string(++tokens) + R"("})");
    if (r.authorization != "t2") return transport_refusal(401, 16, "etcdserver: invalid auth token");
    return serves(r);
  });
  cxxrun::etcd::Options o;
  o.endpoints = parse_endpoints({a.endpoint()}, Protocol::http);
  o.username = "u";
  o.password = "p";
  Client c(o);
  CHECK(c.put("k", "v") == 5);
  CHECK(tokens == 2);
  CHECK(c.put("k", "v") == 5);
  CHECK(tokens == 2);
  // A member that refuses every token: one new token, then the error.
  EtcdMember b([&](const EtcdMember::Request& r) {
    if (r.target == "/v3/auth/authenticate") return EtcdMember::ok("{" + kHeader + R"(,"token":"x"})");
    return transport_refusal(401, 16, "etcdserver: invalid auth token");
  });
  o.endpoints = parse_endpoints({b.endpoint()}, Protocol::http);
  Client d(o);
  CHECK_THROWS_AS(d.put("k", "v"), EtcdAuthError);
  CHECK(b.count("/v3/auth/authenticate") == 2);
}

TEST_CASE("etcd transport: after losing a member, wait until the next follows another leader") {
  auto a = std::make_unique<EtcdMember>([](const EtcdMember::Request&) {
    return EtcdMember::ok(R"({"header":{"cluster_id":"1","member_id":"111","revision":"4"}})");
  });
  std::atomic<int> polls{0};
  EtcdMember b([&](const EtcdMember::Request& r) {
    if (r.target == "/v3/maintenance/status")
      return EtcdMember::ok("{" + kHeader + R"(,"leader":")" + (++polls < 4 ? "111" : "222") + R"("})");
    return serves(r);
  });
  auto c = client_of({a.get(), &b});
  CHECK(c.put("k", "v") == 4);  // from a, whose id is now known
  a.reset();                    // a dies
  CHECK(c.put("k", "v") == 5);
  CHECK(polls == 4);
  CHECK(b.count("/v3/kv/put") == 1);
}

TEST_CASE("etcd transport: a lost leader elected again after its restart ends the wait at once") {
  // The member holding the agents' watches was killed and started again,
  // and won the election its absence started: the wait for "a leader other
  // than the lost one" lasted the whole call (60 s in CI), and the agents'
  // event watch with it.
  auto a = std::make_unique<EtcdMember>([](const EtcdMember::Request&) {
    return EtcdMember::ok(R"({"header":{"cluster_id":"1","member_id":"111","revision":"4","raft_term":"2"}})");
  });
  std::atomic<int> polls{0};
  EtcdMember b([&](const EtcdMember::Request& r) {
    if (r.target == "/v3/maintenance/status") {
      ++polls;
      return EtcdMember::ok(R"({"header":{"cluster_id":"1","member_id":"222","revision":"5","raft_term":"3"},)"
                        R"("leader":"111"})");
    }
    return serves(r);
  });
  auto c = client_of({a.get(), &b});
  CHECK(c.put("k", "v") == 4);  // from a, the leader in term 2
  a.reset();
  CHECK(c.put("k", "v") == 5);
  CHECK(polls == 1);
}

TEST_CASE("etcd transport: a lost member that still leads holds a call no longer than an election takes") {
  // A member lost to a broken connection, not a death: no election comes,
  // and only the call's deadline ended the wait.
  auto a = std::make_unique<EtcdMember>([](const EtcdMember::Request&) {
    return EtcdMember::ok(R"({"header":{"cluster_id":"1","member_id":"111","revision":"4","raft_term":"2"}})");
  });
  EtcdMember b([&](const EtcdMember::Request& r) {
    if (r.target == "/v3/maintenance/status")
      return EtcdMember::ok(R"({"header":{"cluster_id":"1","member_id":"222","revision":"5","raft_term":"2"},)"
                        R"("leader":"111"})");
    return serves(r);
  });
  auto c = client_of({a.get(), &b}, 12s);
  CHECK(c.put("k", "v") == 4);
  a.reset();
  const auto began = std::chrono::steady_clock::now();
  CHECK(c.put("k", "v") == 5);
  CHECK(std::chrono::steady_clock::now() - began < 10s);
}

TEST_CASE("etcd transport: no member reachable, each named") {
  int port;
  {
    EtcdMember gone(serves);
    port = std::stoi(gone.endpoint().substr(10));
  }
  cxxrun::etcd::Options o;
  o.endpoints = parse_endpoints({"127.0.0.1:" + std::to_string(port)}, Protocol::http);
  o.timeout = 200ms;
  Client c(o);
  CHECK_THROWS_AS(c.range("k"), EtcdUnavailable);
  CHECK_THROWS_WITH(c.range("k"), Catch::Contains("no member reachable") &&
                                      Catch::Contains("127.0.0.1:" + std::to_string(port) + ": Connection refused"));
}

// A member whose accept queue is full: SYNs are dropped and a connect
// hangs until its deadline. A listen backlog of 0 holds one connection.
TEST_CASE("etcd watch: a deadline that ends its connect is a timeout, not an unreachable cluster") {
  Listener full(0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(full.port);
  std::vector<int> fillers;
  for (int i = 0; i < 3; ++i) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    fillers.push_back(fd);
  }
  cxxrun::etcd::Options o;
  o.endpoints = parse_endpoints({"127.0.0.1:" + std::to_string(full.port)}, Protocol::http);
  o.timeout = 100ms;  // a wait's last slice
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_AS(Watch(o, "k", Watch::Scope::key, 1), EtcdTimeout);
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  for (int fd : fillers) close(fd);
}

TEST_CASE("etcd transport: which refusals are retried") {
  CHECK(classify(14, "etcdserver: no leader") == Refusal::retry);
  CHECK(classify(14, "etcdserver: leader changed") == Refusal::retry);
  CHECK(classify(14, "etcdserver: request timed out") == Refusal::maybe_applied);
  CHECK(classify(14, "etcdserver: server stopped") == Refusal::maybe_applied);
  CHECK(classify(14, "HTTP 502") == Refusal::maybe_applied);  // a proxy's 502, as gRPC maps it
  // An overloaded member's answer (Unknown), the gateway's 500 before.
  CHECK(classify(2, "context deadline exceeded") == Refusal::maybe_applied);
  CHECK(classify(2, "etcdserver: some other failure") == Refusal::final);
  CHECK(classify(16, "etcdserver: invalid auth token") == Refusal::bad_token);
  CHECK(classify(3, "etcdserver: user name is empty") == Refusal::bad_token);
  CHECK(classify(3, "etcdserver: authentication failed, invalid user ID or password") == Refusal::auth);
  CHECK(classify(7, "etcdserver: permission denied") == Refusal::auth);
  CHECK(classify(3, "etcdserver: key is not provided") == Refusal::final);
  CHECK(classify(5, "etcdserver: requested lease not found") == Refusal::final);
  CHECK(format_duration(250ms) == "250 ms");
  CHECK(format_duration(1500ms) == "1.5 s");
}
