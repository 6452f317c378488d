// A connect storm on a TCPStore-compatible server, as every rank of a large
// job makes at init_process_group: N clients each connect, say VALIDATE
// (torch >= 2.2), SET a key of their own, GET it back, and stay connected
// until every client is done, as ranks do. All connects are started at once,
// from one thread with one epoll, non-blocking: the driver is not the limit.
//
// Source addresses are spread over 127.0.0.0/8 (bind to 127.x.y.z, port 0,
// before connect), so that the 28k ephemeral ports of one source address do
// not run out: one source per --per-source clients.
//
// --max-open M keeps at most M sockets open at once (default: every
// client): where RLIMIT_NOFILE's hard limit is below the client count and
// cannot be raised (no CAP_SYS_RESOURCE), clients that are done are closed,
// oldest first, to make room, and the rest connect as soon as they can.
//
//   connect_storm --port P [--host 127.0.0.1] [--clients 100000] [--per-source 10000]
//                 [--max-open M] [--value-bytes 64] [--timeout 120] [--server-pid PID]
//
// Prints one line of JSON: how many clients finished, the storm's wall time
// (first connect → last reply), each client's time from its connect to its
// GET reply (median, p99, max), how many connects the kernel refused or reset
// (each is retried), and, with --server-pid, the server's peak fd count and
// peak RSS (VmHWM) as /proc shows them.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <deque>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <string>
#include <vector>

#include "args.h"
#include "wire_bytes.h"

using Clock = std::chrono::steady_clock;

namespace {

using bench_wire::put_bytes;

enum class Phase : uint8_t { connecting, replying, done, failed };

struct Client {
  int fd = -1;
  Phase phase = Phase::connecting;
  uint32_t sent = 0;  // request bytes sent
  uint32_t got = 0;   // reply bytes read
  Clock::time_point began{};
  Clock::time_point ended{};
};

struct Options {
  std::string host = "127.0.0.1";
  int port = 0;
  int clients = 100000;
  int per_source = 10000;
  int max_open = 0;  // 0: every client
  int value_bytes = 64;
  double timeout = 120;
  int server_pid = 0;
};

// 127.(1 + i / 65536).(i / 256 % 256).(i % 256 + 1)-ish: the i-th source.
in_addr source(int i) {
  in_addr a{};
  const uint32_t host = (127u << 24) | ((1u + static_cast<uint32_t>(i) / 250u) << 16) |
                        ((static_cast<uint32_t>(i) % 250u) << 8) | 1u;
  a.s_addr = htonl(host);
  return a;
}

// The request every client sends, its key made unique by `index`.
std::string request(int index, const std::string& value) {
  std::string out;
  bench_wire::put_validate(out);
  const std::string key = "/storm/" + std::to_string(index);
  out.push_back(1);  // SET
  put_bytes(out, key);
  put_bytes(out, value);
  out.push_back(3);  // GET
  put_bytes(out, key);
  return out;
}

long count_fds(int pid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (!d) return -1;
  long n = 0;
  while (readdir(d)) ++n;
  closedir(d);
  return n - 2;
}

long vm_hwm_kib(int pid) {
  FILE* f = fopen(("/proc/" + std::to_string(pid) + "/status").c_str(), "r");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (fgets(line, sizeof line, f))
    if (!strncmp(line, "VmHWM:", 6)) kib = atol(line + 6);
  fclose(f);
  return kib;
}

class Storm {
 public:
  Storm(const Options& o) : o_(o), clients_(o.clients), value_(o.value_bytes, 'v') {
    target_.sin_family = AF_INET;
    target_.sin_port = htons(o.port);
    inet_pton(AF_INET, o.host.c_str(), &target_.sin_addr);
    ep_ = epoll_create1(EPOLL_CLOEXEC);
  }
  ~Storm() {
    for (Client& c : clients_)
      if (c.fd >= 0) close(c.fd);
    close(ep_);
  }

  int run() {
    start_ = Clock::now();
    max_open_ = o_.max_open > 0 ? std::min(o_.max_open, o_.clients) : o_.clients;
    if (!open_more()) return 1;
    const auto deadline = start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o_.timeout));
    std::vector<epoll_event> events(4096);
    auto next_sample = Clock::now();
    while (finished_ < o_.clients && Clock::now() < deadline) {
      const int n = epoll_wait(ep_, events.data(), static_cast<int>(events.size()), 50);
      for (int k = 0; k < n; ++k) step(static_cast<int>(events[k].data.u32), events[k].events);
      if (!open_more()) return 1;
      if (o_.server_pid > 0 && Clock::now() >= next_sample) {
        peak_fds_ = std::max(peak_fds_, count_fds(o_.server_pid));
        next_sample = Clock::now() + std::chrono::milliseconds(100);
      }
    }
    const auto end = Clock::now();
    if (o_.server_pid > 0) peak_fds_ = std::max(peak_fds_, count_fds(o_.server_pid));
    report(end);
    return done_ == o_.clients ? 0 : 1;
  }

 private:
  // Starts every client not started yet that fits under max_open_, closing
  // the oldest finished ones to make room.
  bool open_more() {
    while (next_ < o_.clients) {
      if (open_ >= max_open_) {
        if (finished_open_.empty()) return true;
        Client& old = clients_[finished_open_.front()];
        finished_open_.pop_front();
        close(old.fd);
        old.fd = -1;
        --open_;
      }
      if (!open(next_)) return false;
      ++open_;
      peak_open_ = std::max(peak_open_, open_);
      ++next_;
    }
    return true;
  }

  bool open(int i) {
    Client& c = clients_[i];
    c.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c.fd < 0) {
      fprintf(stderr, "connect_storm: socket: %s (raise RLIMIT_NOFILE)\n", strerror(errno));
      return false;
    }
    int one = 1;
    setsockopt(c.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    // The port is chosen at connect(), knowing the whole 4-tuple: a port
    // of this source still in TIME_WAIT towards the server (the last run's)
    // is not handed out again.
    setsockopt(c.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof one);
    sockaddr_in from{};
    from.sin_family = AF_INET;
    from.sin_addr = source(i / o_.per_source);
    if (bind(c.fd, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
      fprintf(stderr, "connect_storm: bind: %s\n", strerror(errno));
      return false;
    }
    c.began = Clock::now();
    c.phase = Phase::connecting;
    c.sent = c.got = 0;
    if (connect(c.fd, reinterpret_cast<sockaddr*>(&target_), sizeof target_) != 0 && errno != EINPROGRESS) {
      fprintf(stderr, "connect_storm: connect: %s\n", strerror(errno));
      return false;
    }
    epoll_event ev{};
    ev.events = EPOLLOUT | EPOLLIN;
    ev.data.u32 = static_cast<uint32_t>(i);
    epoll_ctl(ep_, EPOLL_CTL_ADD, c.fd, &ev);
    return true;
  }

  // A connect the kernel refused or reset (a full backlog): a new socket
  // tries again, as torch's client does.
  void retry(int i) {
    Client& c = clients_[i];
    epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
    close(c.fd);
    c.fd = -1;
    ++retries_;
    const auto began = c.began;
    if (!open(i)) {
      c.phase = Phase::failed;
      ++finished_;
      --open_;
      return;
    }
    c.began = began;
  }

  void step(int i, uint32_t events) {
    Client& c = clients_[i];
    if (c.phase == Phase::done || c.phase == Phase::failed) return;
    if (events & (EPOLLERR | EPOLLHUP)) return retry(i);
    if (c.phase == Phase::connecting && (events & EPOLLOUT)) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(c.fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) return retry(i);
      const std::string req = request(i, value_);
      const ssize_t n = send(c.fd, req.data(), req.size(), MSG_NOSIGNAL);
      if (n != static_cast<ssize_t>(req.size())) return retry(i);
      c.phase = Phase::replying;
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u32 = static_cast<uint32_t>(i);
      epoll_ctl(ep_, EPOLL_CTL_MOD, c.fd, &ev);
      return;
    }
    if (c.phase == Phase::replying && (events & EPOLLIN)) {
      char buf[256];
      const ssize_t n = recv(c.fd, buf, sizeof buf, 0);
      if (n <= 0) return retry(i);
      c.got += static_cast<uint32_t>(n);
      if (c.got < 8 + value_.size()) return;
      c.phase = Phase::done;
      c.ended = Clock::now();
      ++done_;
      ++finished_;
      // Held open, as a rank holds its store connection; no more events.
      epoll_ctl(ep_, EPOLL_CTL_DEL, c.fd, nullptr);
      finished_open_.push_back(i);
    }
  }

  void report(Clock::time_point end) {
    std::vector<double> ms;
    Clock::time_point last = start_;
    for (const Client& c : clients_)
      if (c.phase == Phase::done) {
        ms.push_back(std::chrono::duration<double, std::milli>(c.ended - c.began).count());
        last = std::max(last, c.ended);
      }
    std::sort(ms.begin(), ms.end());
    auto at = [&](double q) { return ms.empty() ? 0.0 : ms[std::min(ms.size() - 1, size_t(q * ms.size()))]; };
    const double wall = std::chrono::duration<double>((done_ == o_.clients ? last : end) - start_).count();
    printf("{\"clients\": %d, \"done\": %d, \"wall_s\": %.3f, \"client_ms_p50\": %.1f, \"client_ms_p99\": %.1f, "
           "\"client_ms_max\": %.1f, \"connect_retries\": %ld, \"sources\": %d, \"peak_open\": %d",
           o_.clients, done_, wall, at(0.5), at(0.99), ms.empty() ? 0.0 : ms.back(), retries_,
           (o_.clients + o_.per_source - 1) / o_.per_source, peak_open_);
    if (o_.server_pid > 0)
      printf(", \"server_peak_fds\": %ld, \"server_peak_rss_mib\": %.1f", peak_fds_,
             vm_hwm_kib(o_.server_pid) / 1024.0);
    printf("}\n");
  }

  const Options o_;
  std::vector<Client> clients_;
  const std::string value_;
  sockaddr_in target_{};
  int ep_ = -1;
  Clock::time_point start_{};
  int done_ = 0;
  int finished_ = 0;
  long retries_ = 0;
  long peak_fds_ = 0;
  int max_open_ = 0;
  int next_ = 0;        // the next client to start
  int open_ = 0;        // sockets open now
  int peak_open_ = 0;
  std::deque<int> finished_open_;  // done, still open, oldest first
};

}  // namespace

int main(int argc, char** argv) {
  Options o;
  using bench_args::arg;
  if (!bench_args::parse("connect_storm", argc, argv,
                         {arg("--host", o.host), arg("--port", o.port), arg("--clients", o.clients),
                          arg("--per-source", o.per_source), arg("--max-open", o.max_open),
                          arg("--value-bytes", o.value_bytes), arg("--timeout", o.timeout),
                          arg("--server-pid", o.server_pid)}))
    return 2;
  in_addr probe{};
  if (o.port <= 0 || o.port > 65535 || o.clients <= 0 || o.per_source <= 0 || o.per_source > 20000 ||
      o.value_bytes < 0 || o.timeout <= 0 || o.max_open < 0 || inet_pton(AF_INET, o.host.c_str(), &probe) != 1) {
    fprintf(stderr, "connect_storm: --port P (1..65535) is required; --clients and --timeout must be positive; "
                    "--per-source is 1..20000; --host is an IPv4 address\n");
    return 2;
  }
  // One descriptor per client, and a few.
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  const rlim_t want = static_cast<rlim_t>(o.max_open > 0 ? std::min(o.max_open, o.clients) : o.clients) + 64;
  if (limit.rlim_cur < want) {
    limit.rlim_cur = want;
    if (limit.rlim_max < want) limit.rlim_max = want;  // root only
    if (setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      fprintf(stderr, "connect_storm: cannot raise RLIMIT_NOFILE to %lu: %s\n", static_cast<unsigned long>(want),
              strerror(errno));
      return 1;
    }
  }
  return Storm(o).run();
}
