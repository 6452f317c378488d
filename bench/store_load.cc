// Store throughput: C connections, each a sequential client running a
// set/get mix on its own key against a TCPStore-compatible server, driven by
// T threads with an epoll loop each. The wire bytes are written here, not
// taken from our client, so the same driver measures our server and torch's:
// --protocol legacy for torch 1.13's server, modern for torch 2.x's. One
// thread keeps the driver cheap on a small machine; more threads let a
// machine with cores to spare push a single-threaded server to its limit.
//
// Each iteration on a connection: SET key value (no reply in either
// protocol), then GET key (reply: u64 length + bytes); both count as
// operations.
//
//   store_load --port P [--host 127.0.0.1] [--clients 64] [--threads 1] [--seconds 3]
//              [--value-bytes 64] [--protocol legacy|modern]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "args.h"
#include "wire_bytes.h"

using Clock = std::chrono::steady_clock;

namespace {

using bench_wire::put_bytes;

struct Conn {
  int fd = -1;
  std::string request;  // SET + GET, built once
  size_t expect = 0;    // reply bytes per iteration
  size_t got = 0;
};

bool send_all(int fd, const std::string& data) {
  size_t off = 0;
  while (off < data.size()) {
    ssize_t n = send(fd, data.data() + off, data.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += n;
  }
  return true;
}

// Connects and says hello: the modern protocol's VALIDATE (no reply).
bool open_conn(Conn& k, const sockaddr_in& addr, bool modern, int index, const std::string& value) {
  k.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  setsockopt(k.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(k.fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) return false;
  if (modern) {
    std::string hello;
    bench_wire::put_validate(hello);
    if (!send_all(k.fd, hello)) return false;
  }
  const std::string key = "/bench/" + std::to_string(index);
  k.request.push_back(modern ? 1 : 0);  // SET
  put_bytes(k.request, key);
  put_bytes(k.request, value);
  k.request.push_back(modern ? 3 : 2);  // GET
  put_bytes(k.request, key);
  k.expect = 8 + value.size();
  return true;
}

// Runs its connections until `end`; returns completed iterations, or -1.
long long drive(std::vector<Conn>& conns, Clock::time_point end) {
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  for (size_t c = 0; c < conns.size(); ++c) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(c);
    epoll_ctl(ep, EPOLL_CTL_ADD, conns[c].fd, &ev);
  }
  for (auto& k : conns)
    if (!send_all(k.fd, k.request)) return fprintf(stderr, "store_load: send failed\n"), -1;
  long long iterations = 0;
  std::vector<epoll_event> events(conns.size());
  std::vector<char> buf(1 << 16);
  while (Clock::now() < end) {
    int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), 100);
    for (int i = 0; i < n; ++i) {
      Conn& k = conns[events[i].data.u32];
      ssize_t r = recv(k.fd, buf.data(), buf.size(), 0);
      if (r <= 0) return fprintf(stderr, "store_load: the server closed a connection\n"), -1;
      k.got += r;
      if (k.got < k.expect) continue;
      if (k.got > k.expect) return fprintf(stderr, "store_load: unexpected reply bytes\n"), -1;
      k.got = 0;
      ++iterations;
      if (!send_all(k.fd, k.request)) return fprintf(stderr, "store_load: send failed\n"), -1;
    }
  }
  close(ep);
  return iterations;
}

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1", protocol = "legacy";
  int port = 0, clients = 64, threads = 1, value_bytes = 64;
  double seconds = 3;
  using bench_args::arg;
  if (!bench_args::parse("store_load", argc, argv,
                         {arg("--host", host), arg("--port", port), arg("--clients", clients),
                          arg("--threads", threads), arg("--seconds", seconds), arg("--value-bytes", value_bytes),
                          arg("--protocol", protocol)}))
    return 2;
  if (port <= 0 || clients <= 0 || seconds <= 0 || value_bytes < 0 || threads <= 0 || threads > clients ||
      (protocol != "legacy" && protocol != "modern")) {
    fprintf(stderr,
            "store_load: --port P is required; --clients, --seconds and --threads (<= clients) must be "
            "positive; --protocol is legacy or modern\n");
    return 2;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    fprintf(stderr, "store_load: --host must be an IPv4 address\n");
    return 2;
  }
  const std::string value(value_bytes, 'v');
  std::vector<std::vector<Conn>> shards(threads);
  for (int c = 0; c < clients; ++c) {
    Conn k;
    if (!open_conn(k, addr, protocol == "modern", c, value)) {
      fprintf(stderr, "store_load: cannot connect to %s:%d: %s\n", host.c_str(), port, strerror(errno));
      return 1;
    }
    shards[c % threads].push_back(std::move(k));
  }
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  std::atomic<long long> iterations{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> workers;
  for (auto& shard : shards)
    workers.emplace_back([&, s = &shard] {
      long long n = drive(*s, end);
      if (n < 0) failed = true;
      else iterations += n;
    });
  for (auto& w : workers) w.join();
  if (failed) return 1;
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  printf("{\"clients\": %d, \"threads\": %d, \"protocol\": \"%s\", \"ops\": %lld, \"seconds\": %.3f, "
         "\"ops_per_second\": %.0f}\n",
         clients, threads, protocol.c_str(), 2 * iterations.load(), secs, 2 * iterations / secs);
  for (auto& shard : shards)
    for (auto& k : shard) close(k.fd);
  return 0;
}
