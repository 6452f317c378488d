// Store throughput: C connections driven from one thread with epoll, each a
// sequential client running a set/get mix on its own keys against a
// TCPStore-compatible server, in torch 1.13's legacy protocol so the same
// driver measures our server and torch's. One thread keeps the driver cheap,
// so on a small machine the server, not the load generator, is what limits.
//
// Each iteration on a connection: SET key value (legacy SET has no reply),
// then GET key (reply: u64 length + bytes); both count as operations.
//
//   store_load --port P [--host 127.0.0.1] [--clients 64] [--seconds 3] [--value-bytes 64]
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

using Clock = std::chrono::steady_clock;

namespace {

void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }
void put_bytes(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

struct Conn {
  int fd = -1;
  std::string request;   // SET + GET, built once
  size_t expect = 0;     // reply bytes per iteration
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

}  // namespace

int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0, clients = 64, value_bytes = 64;
  double seconds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "--host")) host = argv[i + 1];
    else if (!strcmp(argv[i], "--port")) port = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--clients")) clients = atoi(argv[i + 1]);
    else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    else if (!strcmp(argv[i], "--value-bytes")) value_bytes = atoi(argv[i + 1]);
    else {
      fprintf(stderr, "store_load: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  if (port <= 0 || clients <= 0 || seconds <= 0 || value_bytes < 0) {
    fprintf(stderr, "store_load: --port P is required; --clients and --seconds must be positive\n");
    return 2;
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    fprintf(stderr, "store_load: --host must be an IPv4 address\n");
    return 2;
  }
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  std::vector<Conn> conns(clients);
  const std::string value(value_bytes, 'v');
  for (int c = 0; c < clients; ++c) {
    Conn& k = conns[c];
    k.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(k.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(k.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      fprintf(stderr, "store_load: cannot connect to %s:%d: %s\n", host.c_str(), port, strerror(errno));
      return 1;
    }
    const std::string key = "/bench/" + std::to_string(c);
    k.request.push_back(0);  // legacy SET
    put_bytes(k.request, key);
    put_bytes(k.request, value);
    k.request.push_back(2);  // legacy GET
    put_bytes(k.request, key);
    k.expect = 8 + value.size();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u32 = c;
    epoll_ctl(ep, EPOLL_CTL_ADD, k.fd, &ev);
  }
  long long iterations = 0;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  for (auto& k : conns)
    if (!send_all(k.fd, k.request)) return fprintf(stderr, "store_load: send failed\n"), 1;
  std::vector<epoll_event> events(clients);
  std::vector<char> buf(1 << 16);
  while (Clock::now() < end) {
    int n = epoll_wait(ep, events.data(), clients, 100);
    for (int i = 0; i < n; ++i) {
      Conn& k = conns[events[i].data.u32];
      ssize_t r = recv(k.fd, buf.data(), buf.size(), 0);
      if (r <= 0) return fprintf(stderr, "store_load: the server closed a connection\n"), 1;
      k.got += r;
      if (k.got < k.expect) continue;
      if (k.got > k.expect) return fprintf(stderr, "store_load: unexpected reply bytes\n"), 1;
      k.got = 0;
      ++iterations;
      if (!send_all(k.fd, k.request)) return fprintf(stderr, "store_load: send failed\n"), 1;
    }
  }
  const double secs = std::chrono::duration<double>(Clock::now() - start).count();
  printf("{\"clients\": %d, \"ops\": %lld, \"seconds\": %.3f, \"ops_per_second\": %.0f}\n", clients,
         2 * iterations, secs, 2 * iterations / secs);
  for (auto& k : conns) close(k.fd);
  close(ep);
  return 0;
}
