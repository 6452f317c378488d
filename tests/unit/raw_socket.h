// A blocking POSIX TCP client for server tests that speak raw bytes. Every
// read and write has a deadline, so a server bug fails a test, not CI.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <string>

class RawSocket {
 public:
  static constexpr int kTimeoutMs = 5000;

  explicit RawSocket(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    timeval tv{kTimeoutMs / 1000, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    // Fire-and-forget requests (SET) followed by another must not sit in
    // Nagle's buffer waiting for a delayed ACK.
    int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    REQUIRE(connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  }
  ~RawSocket() {
    if (fd_ >= 0) close(fd_);
  }
  RawSocket(const RawSocket&) = delete;
  RawSocket& operator=(const RawSocket&) = delete;

  // False when the server has closed the connection (EPIPE/ECONNRESET).
  bool send(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }

  // Exactly n bytes; fails the test on timeout or EOF.
  std::string recv(size_t n) {
    std::string out(n, '\0');
    size_t done = 0;
    while (done < n) {
      ssize_t got = ::recv(fd_, out.data() + done, n - done, 0);
      if (got < 0 && errno == EINTR) continue;
      if (got < 0) FAIL("no reply within " << kTimeoutMs << " ms (" << done << "/" << n << " bytes)");
      if (got == 0) FAIL("server closed the connection (" << done << "/" << n << " bytes)");
      done += static_cast<size_t>(got);
    }
    return out;
  }

  // Sends a request and reads a reply of the expected reply's size.
  std::string ask(const std::string& request, size_t reply_size) {
    REQUIRE(send(request));
    return recv(reply_size);
  }

  // True when the server closes the connection within the deadline, sending
  // nothing first.
  bool closed_by_server() {
    char byte;
    ssize_t got = ::recv(fd_, &byte, 1, 0);
    return got == 0 || (got < 0 && errno == ECONNRESET);
  }

  // True when nothing arrives for `ms` milliseconds.
  bool silent_for(int ms) {
    pollfd p{fd_, POLLIN, 0};
    return poll(&p, 1, ms) == 0;
  }

  int fd() const { return fd_; }

 private:
  int fd_ = -1;
};
