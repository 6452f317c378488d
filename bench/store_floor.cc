// The floor under bench/store.sh's throughput numbers: the least a
// single-threaded socket server can do for store_load's SET+GET traffic.
// Per readable connection one recv and, when requests completed, one send;
// it parses the frames of both protocols but keeps no store: a GET is
// answered with the value of the connection's last SET. No Asio, no hash
// map, no allocation per request, so what it costs per operation is the
// kernel's share (epoll, recv, send) that every server pays. A real server's
// ratio to torch cannot exceed this one's on the same machine and driver.
//
//   store_floor --port P      (127.0.0.1; runs until killed)
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Conn {
  std::string in;
  std::string value;  // the last SET's value: what a GET returns
  bool modern = false;
  bool known = false;  // protocol told from the first byte
};

bool read_u64(const std::string& in, size_t& at, uint64_t& v) {
  if (in.size() - at < 8) return false;
  std::memcpy(&v, in.data() + at, 8);
  at += 8;
  return true;
}

bool read_field(const std::string& in, size_t& at, size_t& begin, uint64_t& size) {
  if (!read_u64(in, at, size) || in.size() - at < size) return false;
  begin = at;
  at += size;
  return true;
}

// Consumes every complete request in k.in and appends the replies to out.
// Returns false on a request store_load never sends.
bool serve(Conn& k, std::string& out) {
  size_t at = 0;
  for (;;) {
    size_t start = at, begin = 0;
    uint64_t size = 0;
    if (at == k.in.size()) break;
    if (!k.known) {  // modern clients open with VALIDATE (op 0 + u32 magic)
      k.known = true;
      k.modern = k.in.size() >= 5 && static_cast<uint8_t>(k.in[0]) == 0 &&
                 std::memcmp(k.in.data() + 1, "\xce\xf7\x85\x3c", 4) == 0;
      if (k.modern) {
        at = 5;
        continue;
      }
    }
    const uint8_t op = static_cast<uint8_t>(k.in[at++]);
    const uint8_t set = k.modern ? 1 : 0, get = k.modern ? 3 : 2;
    if (op != set && op != get) return false;
    if (!read_field(k.in, at, begin, size)) {  // the key
      at = start;
      break;
    }
    if (op == set) {
      if (!read_field(k.in, at, begin, size)) {
        at = start;
        break;
      }
      k.value.assign(k.in, begin, size);
    } else {
      uint64_t n = k.value.size();
      out.append(reinterpret_cast<const char*>(&n), 8);
      out += k.value;
    }
  }
  k.in.erase(0, at);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 || std::strcmp(argv[1], "--port") != 0 || std::atoi(argv[2]) <= 0) {
    std::fprintf(stderr, "usage: store_floor --port P\n");
    return 2;
  }
  const int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
  setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(std::atoi(argv[2]));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(lfd, 1024) != 0) {
    std::fprintf(stderr, "store_floor: cannot listen on 127.0.0.1:%s: %s\n", argv[2], std::strerror(errno));
    return 1;
  }
  const int ep = epoll_create1(EPOLL_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = lfd;
  epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
  std::vector<Conn> conns(1024);
  std::vector<epoll_event> events(256);
  std::vector<char> buf(1 << 16);
  std::string out;
  for (;;) {
    const int n = epoll_wait(ep, events.data(), static_cast<int>(events.size()), -1);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == lfd) {
        const int c = accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) continue;
        if (static_cast<size_t>(c) >= conns.size()) conns.resize(c + 1);
        conns[c] = Conn{};
        setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        epoll_event e{};
        e.events = EPOLLIN;
        e.data.fd = c;
        epoll_ctl(ep, EPOLL_CTL_ADD, c, &e);
        continue;
      }
      const ssize_t r = recv(fd, buf.data(), buf.size(), 0);
      Conn& k = conns[fd];
      if (r > 0) k.in.append(buf.data(), r);
      out.clear();
      // Replies are small and the driver waits for each: a blocking send
      // takes them whole.
      if (r <= 0 || !serve(k, out) ||
          (!out.empty() && send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size()))) {
        close(fd);  // also leaves the epoll set
        k = Conn{};
      }
    }
  }
}
