// The health server (agent/report/health_server.h) over real sockets: what
// /healthz and /metrics answer, bad and oversized requests, slow and silent
// clients, close(). The texts themselves are test_health_report.cc's.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "agent/report/health_server.h"
#include "health_snapshot_sample.h"
#include "listener.h"

using namespace cxxrun::agent;
using nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// A raw client whose every wait is bounded by poll(), so a server bug fails
// a test instead of hanging it.
class Client {
 public:
  explicit Client(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    // Loopback connects complete (or are refused) at once.
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~Client() { shut(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  void shut() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

  // False once the server has closed the connection.
  bool send(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      pollfd p{fd_, POLLOUT, 0};
      if (poll(&p, 1, 5000) != 1) return false;
      ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  struct Read {
    std::string bytes;
    bool closed = false;
  };
  // Everything until the server closes, or until `limit` passes.
  Read read_until_closed(milliseconds limit) {
    Read r;
    const auto deadline = Clock::now() + limit;
    char buf[4096];
    for (;;) {
      const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) return r;
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(left)) == 0) return r;
      ssize_t n = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        r.closed = true;
        return r;
      }
      r.bytes.append(buf, static_cast<size_t>(n));
    }
  }

 private:
  int fd_ = -1;
};

struct Response {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;
};

Response parse_response(const std::string& raw) {
  Response r;
  const size_t head_end = raw.find("\r\n\r\n");
  REQUIRE(head_end != std::string::npos);
  const std::string head = raw.substr(0, head_end);
  r.body = raw.substr(head_end + 4);
  REQUIRE(head.rfind("HTTP/1.1 ", 0) == 0);
  r.status = std::stoi(head.substr(9, 3));
  size_t at = head.find("\r\n");
  while (at != std::string::npos) {
    const size_t next = head.find("\r\n", at + 2);
    const std::string line = head.substr(at + 2, next == std::string::npos ? std::string::npos : next - at - 2);
    const size_t colon = line.find(':');
    REQUIRE(colon != std::string::npos);
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
    at = next;
  }
  CHECK(r.headers["content-length"] == std::to_string(r.body.size()));
  CHECK(r.headers["connection"] == "close");
  return r;
}

// One request on a fresh connection; the server must answer and close.
Response ask(int port, const std::string& request) {
  Client c(port);
  REQUIRE(c.send(request));
  Client::Read r = c.read_until_closed(milliseconds(3000));
  REQUIRE(r.closed);
  return parse_response(r.bytes);
}

Response get(int port, const std::string& path) {
  return ask(port, "GET " + path + " HTTP/1.1\r\nHost: localhost\r\nUser-Agent: test\r\n\r\n");
}

// A HealthServer on 127.0.0.1:<any> whose io_context runs on its own thread,
// as the agent's loop would.
struct Running {
  boost::asio::io_context io;
  std::mutex mu;
  HealthSnapshot snapshot = sample_snapshot();
  int snapshots_taken = 0;
  std::unique_ptr<HealthServer> server;
  std::thread thread;

  Running() {
    server = std::make_unique<HealthServer>(io, "127.0.0.1", 0, [this] {
      std::lock_guard lock(mu);
      ++snapshots_taken;
      return snapshot;
    });
    thread = std::thread([this] { io.run(); });
  }
  ~Running() {
    io.stop();
    thread.join();
    server.reset();  // nothing runs io now, as close() requires
  }
  int port() const { return server->port(); }
  void set_state(GroupState state) {
    std::lock_guard lock(mu);
    snapshot.state = state;
  }
};

}  // namespace



TEST_CASE("health server: /healthz reports the snapshot as JSON") {
  Running s;
  REQUIRE(s.port() > 0);
  CHECK(s.server->address() == "127.0.0.1:" + std::to_string(s.port()));

  Response r = get(s.port(), "/healthz");
  CHECK(r.status == 200);
  CHECK(r.headers["content-type"] == "application/json");
  const json body = json::parse(r.body);
  CHECK(body["state"] == "HEALTHY");
  CHECK(body["run_id"] == "job42");
  CHECK(body["role"] == "trainer");
  CHECK(body["group_rank"] == 1);
  CHECK(body["group_world_size"] == 2);
  CHECK(body["restart_count"] == 2);
  CHECK(body["max_restarts"] == 3);
  REQUIRE(body["workers"].size() == 2);
  CHECK(body["workers"][0] == json{{"local_rank", 0},
                                   {"rank", 4},
                                   {"pid", 1000},
                                   {"state", "running"},
                                   {"seconds_since_heartbeat", 1.5},
                                   {"cause", nullptr},
                                   {"cause_detail", nullptr}});
  CHECK(body["workers"][1]["state"] == "failed");
  CHECK(body["workers"][1]["seconds_since_heartbeat"].is_null());
  // Why it failed, in the words of the failure summary (agent/forensics/death.h).
  CHECK(body["workers"][1]["cause"] == "oom-killed");
  CHECK(body["workers"][1]["cause_detail"] == "oom-killed: the kernel's OOM killer killed pid 1001");
  CHECK(body["node_healthy"] == true);

  // A query string and bare-LF line ends are accepted.
  CHECK(ask(s.port(), "GET /healthz?verbose=1 HTTP/1.0\n\n").status == 200);
}

TEST_CASE("health server: /healthz answers 503 for UNKNOWN, UNHEALTHY and FAILED") {
  Running s;
  for (GroupState state : kAllGroupStates) {
    s.set_state(state);
    Response r = get(s.port(), "/healthz");
    INFO(group_state_name(state));
    const bool bad = state == GroupState::unknown || state == GroupState::unhealthy || state == GroupState::failed;
    CHECK(r.status == (bad ? 503 : 200));
    CHECK(json::parse(r.body)["state"] == std::string(group_state_name(state)));
  }
}

TEST_CASE("health server: /healthz keeps the last hang verdict, who stands apart and the stack") {
  Running s;
  CHECK(json::parse(get(s.port(), "/healthz").body)["last_hang"].is_null());
  {
    std::lock_guard lock(s.mu);
    s.snapshot.last_hang = HangHealth{"no worker made progress for 10.0 s (--hang-timeout 10 s)",
                                      "ranks 0\u20132 wait in all_reduce at w.py:61; rank 3 waits in wedge at w.py:78",
                                      "/logs/run/attempt_0/hang-0", 3, "File \"w.py\", line 78 in wedge"};
  }
  const json hang = json::parse(get(s.port(), "/healthz").body)["last_hang"];
  CHECK(hang["rank"] == 3);
  CHECK(hang["picture"] == "ranks 0\u20132 wait in all_reduce at w.py:61; rank 3 waits in wedge at w.py:78");
  CHECK(hang["stacks"] == "/logs/run/attempt_0/hang-0");
  CHECK(hang["stack"] == "File \"w.py\", line 78 in wedge");
  CHECK(hang["what"] == "no worker made progress for 10.0 s (--hang-timeout 10 s)");
}

TEST_CASE("health server: a node with an unkillable worker answers 503 whatever its state") {
  Running s;
  {
    std::lock_guard lock(s.mu);
    s.snapshot.node_healthy = false;
  }
  Response r = get(s.port(), "/healthz");
  CHECK(r.status == 503);
  CHECK(json::parse(r.body)["node_healthy"] == false);
  CHECK(get(s.port(), "/metrics").body.find("cxxrun_node_healthy 0\n") != std::string::npos);
}

TEST_CASE("health server: /metrics is Prometheus text format 0.0.4") {
  Running s;
  {
    std::lock_guard lock(s.mu);
    s.snapshot.run_id = "a\"b\\c";
  }
  Response r = get(s.port(), "/metrics");
  CHECK(r.status == 200);
  CHECK(r.headers["content-type"].find("text/plain") == 0);
  CHECK(r.headers["content-type"].find("version=0.0.4") != std::string::npos);
  REQUIRE(!r.body.empty());
  CHECK(r.body.back() == '\n');

  const std::regex sample_line(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$)");
  const std::regex help_line(R"(^# HELP ([a-zA-Z_:][a-zA-Z0-9_:]*) .+$)");
  const std::regex type_line(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter|untyped)$)");
  std::set<std::string> helped, typed;
  std::map<std::string, std::string> samples;  // "name{labels}" -> value
  std::istringstream in(r.body);
  for (std::string line; std::getline(in, line);) {
    INFO(line);
    std::smatch m;
    if (std::regex_match(line, m, help_line)) {
      helped.insert(m[1]);
    } else if (std::regex_match(line, m, type_line)) {
      CHECK(helped.count(m[1]));
      typed.insert(m[1]);
    } else {
      REQUIRE(std::regex_match(line, m, sample_line));
      CHECK(typed.count(m[1]));
      std::size_t used = 0;
      const std::string value = m[4];
      (void)std::stod(value, &used);
      CHECK(used == value.size());
      samples[m[1].str() + (m[2].matched ? m[2].str() : "")] = value;
    }
  }
  CHECK(samples.at("cxxrun_restart_count") == "2");
  CHECK(samples.at("cxxrun_max_restarts") == "3");
  CHECK(samples.at("cxxrun_remaining_restarts") == "1");
  CHECK(samples.at("cxxrun_group_world_size") == "2");
  CHECK(samples.at("cxxrun_workers_running") == "1");
  CHECK(samples.at("cxxrun_agent_state{state=\"HEALTHY\"}") == "1");
  CHECK(samples.at("cxxrun_agent_state{state=\"FAILED\"}") == "0");
  CHECK(samples.at("cxxrun_agent_info{run_id=\"a\\\"b\\\\c\",role=\"trainer\",group_rank=\"1\"}") == "1");
  CHECK(samples.at("cxxrun_worker_running{local_rank=\"0\",rank=\"4\"}") == "1");
  CHECK(samples.at("cxxrun_worker_running{local_rank=\"1\",rank=\"5\"}") == "0");
  CHECK(samples.at("cxxrun_worker_seconds_since_heartbeat{local_rank=\"0\",rank=\"4\"}") == "1.5");
  CHECK(samples.count("cxxrun_worker_seconds_since_heartbeat{local_rank=\"1\",rank=\"5\"}") == 0);
  CHECK(samples.at("cxxrun_node_healthy") == "1");
  CHECK(samples.at("cxxrun_worker_failures_total{cause=\"oom-killed\"}") == "1");
  CHECK(samples.at("cxxrun_worker_failures_total{cause=\"crashed\"}") == "0");
}

TEST_CASE("health server: 404, 405 and 400") {
  Running s;
  CHECK(get(s.port(), "/").status == 404);
  CHECK(get(s.port(), "/healthzz").status == 404);
  Response post = ask(s.port(), "POST /healthz HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello");
  CHECK(post.status == 405);
  CHECK(post.headers["allow"] == "GET");
  CHECK(ask(s.port(), "DELETE /metrics HTTP/1.1\r\n\r\n").status == 405);
  CHECK(ask(s.port(), "hello there\r\n\r\n").status == 400);
  CHECK(ask(s.port(), "GET /healthz SPDY/3\r\n\r\n").status == 400);
  // Garbage costs no snapshot.
  std::lock_guard lock(s.mu);
  CHECK(s.snapshots_taken == 0);
}

TEST_CASE("health server: an oversized request is closed without an answer") {
  Running s;
  Client c(s.port());
  c.send("GET /" + std::string(HealthServer::kMaxRequestBytes + 100, 'a'));  // may fail once closed
  Client::Read r = c.read_until_closed(milliseconds(3000));
  CHECK(r.closed);
  CHECK(r.bytes.empty());
  CHECK(get(s.port(), "/healthz").status == 200);
}

TEST_CASE("health server: silent and slow clients are closed at the deadline while others are served") {
  Running s;
  const auto start = Clock::now();
  Client silent(s.port());
  Client slow(s.port());
  REQUIRE(slow.send("GET /heal"));

  for (int i = 0; i < 5; ++i) {
    const auto asked = Clock::now();
    CHECK(get(s.port(), i % 2 ? "/metrics" : "/healthz").status == 200);
    CHECK(Clock::now() - asked < milliseconds(1000));
  }
  CHECK(slow.send("thz HTTP/1.1\r\nHost"));  // trickling in does not extend the deadline

  for (Client* c : {&silent, &slow}) {
    Client::Read r = c->read_until_closed(HealthServer::kDeadline + milliseconds(3000));
    CHECK(r.closed);
    CHECK(r.bytes.empty());
  }
  const auto took = Clock::now() - start;
  CHECK(took >= HealthServer::kDeadline - milliseconds(200));
  CHECK(took < HealthServer::kDeadline + milliseconds(2500));
}

TEST_CASE("health server: silent and trickling clients past the cap cannot keep a probe out") {
  Running s;
  // More than the cap of each: silent ones, and slow-loris ones that send
  // a byte of their head now and then.
  std::vector<std::unique_ptr<Client>> silent, slow;
  for (size_t i = 0; i < HealthServer::kMaxConnections + 8; ++i) silent.push_back(std::make_unique<Client>(s.port()));
  for (size_t i = 0; i < HealthServer::kMaxConnections + 8; ++i) {
    slow.push_back(std::make_unique<Client>(s.port()));
    slow.back()->send("G");
  }
  for (int round = 0; round < 3; ++round) {
    for (auto& c : slow) c->send("E");  // may fail once closed: that is the point
    // Every probe is answered, at once (the bound is that of ask()).
    CHECK(get(s.port(), "/healthz").status == 200);
  }
  // The ones that made room were the oldest: the first silent clients.
  Client::Read r = silent.front()->read_until_closed(milliseconds(3000));
  CHECK(r.closed);
  CHECK(r.bytes.empty());
}

TEST_CASE("health server: close() ends open connections and stops accepting") {
  Running s;
  Client waiting(s.port());
  std::promise<void> closed;
  boost::asio::post(s.io, [&] {
    s.server->close();
    closed.set_value();
  });
  REQUIRE(closed.get_future().wait_for(std::chrono::seconds(3)) == std::future_status::ready);
  Client::Read r = waiting.read_until_closed(milliseconds(2000));
  CHECK(r.closed);

  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(s.port()));
  CHECK(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0);
  close(fd);
}

TEST_CASE("health server: a busy port or a bad host throws naming it") {
  boost::asio::io_context io;
  Listener busy;
  try {
    HealthServer server(io, "127.0.0.1", busy.port, [] { return HealthSnapshot{}; });
    FAIL("expected std::system_error");
  } catch (const std::system_error& e) {
    CHECK(std::string(e.what()).find(std::to_string(busy.port)) != std::string::npos);
  }
  CHECK_THROWS_AS(HealthServer(io, "not-an-address", 0, [] { return HealthSnapshot{}; }), std::system_error);
  CHECK_THROWS_AS(HealthServer(io, "127.0.0.1", 70000, [] { return HealthSnapshot{}; }), std::system_error);
}

TEST_CASE("health server: a throwing snapshot answers 500 and the server lives on") {
  boost::asio::io_context io;
  bool fail = true;
  HealthServer server(io, "127.0.0.1", 0, [&] {
    if (fail) throw std::runtime_error("supervisor is busy");
    return sample_snapshot();
  });
  std::thread loop([&] { io.run(); });
  CHECK(get(server.port(), "/healthz").status == 500);
  boost::asio::post(io, [&] { fail = false; });
  CHECK(get(server.port(), "/healthz").status == 200);
  io.stop();
  loop.join();
}

TEST_CASE("health server: an empty host listens on every interface") {
  boost::asio::io_context io;
  HealthServer server(io, "", 0, [] { return sample_snapshot(); });
  const std::string address = server.address();
  CHECK((address == "[::]:" + std::to_string(server.port()) || address == "0.0.0.0:" + std::to_string(server.port())));
  std::thread loop([&] { io.run(); });
  CHECK(get(server.port(), "/healthz").status == 200);
  io.stop();
  loop.join();
}
