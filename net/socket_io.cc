#include "net/socket_io.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "net/endpoint.h"

namespace cxxrun::net::io {
namespace {

// With several addresses (IPv6 and IPv4 of one name) a black-holed first one
// must not eat the whole deadline; the caller's retry loop comes back to it.
constexpr auto kPerAddressLimit = std::chrono::seconds(3);

struct AddrInfoFree {
  void operator()(addrinfo* ai) const {
    if (ai != nullptr) freeaddrinfo(ai);
  }
};
using AddrInfoList = std::unique_ptr<addrinfo, AddrInfoFree>;

std::string errno_text(int err) { return std::strerror(err); }

// Milliseconds for poll(), rounded up so a sub-millisecond remainder still
// waits instead of spinning; 0 once the deadline has passed.
int poll_ms(Deadline deadline) {
  auto left = deadline - Clock::now();
  if (left <= Clock::duration::zero()) return 0;
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(left).count();
  return static_cast<int>(std::min<long long>(ms, 24LL * 3600 * 1000));
}

// poll() for `events` until the deadline; false when it passed first.
bool wait_for(int fd, short events, Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int rc = ::poll(&p, 1, poll_ms(deadline));
    if (rc > 0) return true;
    if (rc == 0) {
      if (Clock::now() >= deadline) return false;
      continue;
    }
    if (errno != EINTR) throw SocketError(std::string("poll failed: ") + errno_text(errno));
  }
}

// Shared between the caller and a resolver thread that may outlive it.
struct Resolution {
  std::mutex mutex;
  std::condition_variable done_cv;
  bool done = false;
  int rc = 0;
  AddrInfoList list;
};

// getaddrinfo cannot be given a deadline, and a hostname lookup may stall on
// DNS; it runs on a detached thread we stop waiting for at the deadline.
// Numeric addresses, the common case, resolve in place.
AddrInfoList resolve_by(const std::string& host, int port, Deadline deadline) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV | AI_NUMERICHOST;
  std::string service = std::to_string(port);
  addrinfo* out = nullptr;
  if (getaddrinfo(host.c_str(), service.c_str(), &hints, &out) == 0) return AddrInfoList(out);

  auto state = std::make_shared<Resolution>();
  hints.ai_flags = AI_NUMERICSERV;
  std::thread([state, host, service, hints] {
    addrinfo* found = nullptr;
    int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
    std::lock_guard lock(state->mutex);
    state->rc = rc;
    state->list.reset(found);
    state->done = true;
    state->done_cv.notify_all();
  }).detach();

  std::unique_lock lock(state->mutex);
  if (!state->done_cv.wait_until(lock, deadline, [&] { return state->done; }))
    throw SocketTimeout("resolving '" + host + "' timed out");
  if (state->rc != 0)
    throw SocketError("cannot resolve '" + host + "': " + gai_strerror(state->rc));
  return std::move(state->list);
}

// errno of one non-blocking connect, 0 on success, ETIMEDOUT at the deadline.
int connect_one(const addrinfo& ai, Deadline deadline, Socket& out) {
  Socket sock(
      ::socket(ai.ai_family, ai.ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai.ai_protocol));
  if (!sock.valid()) return errno;
  if (::connect(sock.fd(), ai.ai_addr, ai.ai_addrlen) != 0) {
    if (errno != EINPROGRESS && errno != EINTR) return errno;
    if (!wait_for(sock.fd(), POLLOUT, deadline)) return ETIMEDOUT;
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(sock.fd(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) return errno;
    if (err != 0) return err;
  }
  int one = 1;
  setsockopt(sock.fd(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  out = std::move(sock);
  return 0;
}

}  // namespace

Socket::~Socket() {
  if (fd_ >= 0) ::close(fd_);
}

Socket& Socket::operator=(Socket&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

Socket connect_tcp(const std::string& host, int port, Deadline deadline) {
  std::string where = format_endpoint({host, port});
  AddrInfoList list = resolve_by(host, port, deadline);
  int last_error = EADDRNOTAVAIL;
  for (addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    Deadline limit =
        ai->ai_next == nullptr ? deadline : std::min(deadline, Clock::now() + kPerAddressLimit);
    Socket sock;
    last_error = connect_one(*ai, limit, sock);
    if (last_error == 0) return sock;
    if (Clock::now() >= deadline) break;
  }
  if (last_error == ETIMEDOUT && Clock::now() >= deadline)
    throw SocketTimeout("connect to " + where + " timed out");
  throw SocketError("connect to " + where + " failed: " + errno_text(last_error));
}

void send_all(const Socket& sock, std::string_view bytes, Deadline deadline, size_t* sent) {
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::send(sock.fd(), bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    if (n > 0) {
      done += static_cast<size_t>(n);
      if (sent != nullptr) *sent = done;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!wait_for(sock.fd(), POLLOUT, deadline)) throw SocketTimeout("send timed out");
      continue;
    }
    throw SocketError(std::string("send failed: ") + errno_text(n < 0 ? errno : EPIPE));
  }
}

void recv_exact(const Socket& sock, char* out, size_t n, Deadline deadline) {
  size_t done = 0;
  while (done < n) {
    ssize_t got = ::recv(sock.fd(), out + done, n - done, 0);
    if (got > 0) {
      done += static_cast<size_t>(got);
      continue;
    }
    if (got == 0) throw SocketError("connection closed by the server");
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) {
      if (!wait_for(sock.fd(), POLLIN, deadline)) throw SocketTimeout("receive timed out");
      continue;
    }
    throw SocketError(std::string("receive failed: ") + errno_text(errno));
  }
}

bool wait_readable(const Socket& sock, Deadline deadline) {
  return wait_for(sock.fd(), POLLIN, deadline);
}

bool input_pending(const Socket& sock) {
  pollfd p{sock.fd(), POLLIN, 0};
  int rc;
  do rc = ::poll(&p, 1, 0);
  while (rc < 0 && errno == EINTR);
  return rc != 0;
}

std::string local_ip(const Socket& sock) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(sock.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw SocketError(std::string("getsockname failed: ") + errno_text(errno));
  try {
    return address_text(addr, len);
  } catch (const std::system_error& e) {
    throw SocketError(e.what());
  }
}

}  // namespace cxxrun::net::io
