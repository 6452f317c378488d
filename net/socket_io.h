// Blocking TCP I/O where every call takes a deadline: the socket is
// non-blocking underneath and each wait is a poll() bounded by the deadline,
// so a silent peer can never hang the caller.
#pragma once

#include <chrono>
#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

namespace cxxrun::net::io {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

// The connection is unusable: refused, reset, closed by the peer, or the host
// could not be resolved. The message says which.
struct SocketError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// The deadline passed first; the connection may still be fine.
struct SocketTimeout : SocketError {
  using SocketError::SocketError;
};

// Owns one file descriptor; move-only.
class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket();
  Socket(Socket&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  Socket& operator=(Socket&& other) noexcept;
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// One attempt per address `host` resolves to (IPv4 and IPv6), in getaddrinfo
// order, each bounded by `deadline`. The socket comes back non-blocking,
// close-on-exec, with TCP_NODELAY (requests are small and latency-bound).
Socket connect_tcp(const std::string& host, int port, Deadline deadline);

// Writes all of `bytes`. `sent`, when given, counts the bytes the kernel
// accepted, so a caller can tell "nothing left this host" from "maybe
// delivered" after a failure.
void send_all(const Socket& sock, std::string_view bytes, Deadline deadline,
              size_t* sent = nullptr);

// Reads exactly n bytes; SocketError when the peer closes first.
void recv_exact(const Socket& sock, char* out, size_t n, Deadline deadline);

// True when input (or end of stream) is ready before the deadline.
bool wait_readable(const Socket& sock, Deadline deadline);

// True when bytes or end of stream are waiting right now. Between requests
// nothing should be, so this detects a peer that went away while idle.
bool input_pending(const Socket& sock);

// The numeric local address of a connected socket ("10.0.0.5", "fe80::1%eth0"),
// with IPv4-mapped IPv6 addresses given as plain IPv4.
std::string local_ip(const Socket& sock);

}  // namespace cxxrun::net::io
