// A scripted stand-in for a store server: it accepts connections one after
// another on 127.0.0.1 and runs a handler on each, so a test can check the
// exact bytes a client sends and answer (or misbehave) byte by byte.
// Handlers run on the server thread; their failures are collected and
// checked on the test thread, since Catch2 assertions are not thread-safe.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "net/socket_io.h"

namespace scripted {

using cxxrun::net::io::Clock;
using cxxrun::net::io::Socket;

// Every wait of the scripted server ends, so a client bug fails a test, not CI.
inline constexpr auto kStepLimit = std::chrono::seconds(10);

// "05 0100000000000000" -> bytes; spaces are for reading only.
inline std::string unhex(std::string_view text) {
  std::string out;
  int nibble = -1;
  for (char c : text) {
    if (c == ' ') continue;
    int v = (c >= '0' && c <= '9') ? c - '0' : (c | 0x20) - 'a' + 10;
    if (nibble < 0) {
      nibble = v;
    } else {
      out.push_back(static_cast<char>(nibble * 16 + v));
      nibble = -1;
    }
  }
  return out;
}

inline std::string hex(std::string_view bytes) {
  static const char* digits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out.push_back(digits[c >> 4]);
    out.push_back(digits[c & 15]);
  }
  return out;
}

inline std::string read_n(const Socket& sock, size_t n) {
  std::string buf(n, '\0');
  cxxrun::net::io::recv_exact(sock, buf.data(), n, Clock::now() + kStepLimit);
  return buf;
}

// Reads as many bytes as `expected_hex` holds and insists they match.
inline void expect(const Socket& sock, std::string_view expected_hex) {
  std::string want = unhex(expected_hex);
  std::string got = read_n(sock, want.size());
  if (got != want) throw std::runtime_error("client sent " + hex(got) + ", expected " + hex(want));
}

inline void reply(const Socket& sock, std::string_view bytes_hex) {
  cxxrun::net::io::send_all(sock, unhex(bytes_hex), Clock::now() + kStepLimit);
}

// True once the client has closed its end (EOF), false if it sent more bytes.
inline bool client_closed(const Socket& sock) {
  char c;
  try {
    cxxrun::net::io::recv_exact(sock, &c, 1, Clock::now() + kStepLimit);
    return false;
  } catch (const cxxrun::net::io::SocketError&) {
    return true;
  }
}

// Ignores whatever the client sends until it closes its end.
inline void drain_until_closed(const Socket& sock) {
  while (!client_closed(sock)) {
  }
}

inline std::string pid_hex() {
  auto pid = static_cast<uint32_t>(getpid());
  return hex(std::string_view(reinterpret_cast<const char*>(&pid), sizeof pid));
}

class Server {
 public:
  using Handler = std::function<void(const Socket&, int index)>;

  // Serves `connections` connections in turn, then stops accepting.
  Server(int connections, Handler handler) {
    listen_ = Socket(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    auto* sa = reinterpret_cast<sockaddr*>(&addr);
    if (bind(listen_.fd(), sa, sizeof addr) != 0 || listen(listen_.fd(), 8) != 0)
      throw std::runtime_error("scripted store server cannot listen");
    socklen_t len = sizeof addr;
    getsockname(listen_.fd(), sa, &len);
    port = ntohs(addr.sin_port);
    thread_ = std::thread([this, connections, handler = std::move(handler)] {
      for (int i = 0; i < connections; ++i) {
        pollfd p{listen_.fd(), POLLIN, 0};
        if (poll(&p, 1, static_cast<int>(std::chrono::milliseconds(kStepLimit).count())) != 1) {
          errors.push_back("no connection #" + std::to_string(i) + " arrived");
          return;
        }
        Socket conn(accept4(listen_.fd(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        try {
          handler(conn, i);
        } catch (const std::exception& e) {
          errors.push_back("connection #" + std::to_string(i) + ": " + e.what());
        }
        ++served;
      }
    });
  }
  ~Server() { join(); }

  // Waits for the script to finish; `errors` and `served` are then final.
  void join() {
    if (thread_.joinable()) thread_.join();
  }

  int port = 0;
  int served = 0;
  std::vector<std::string> errors;

 private:
  Socket listen_;
  std::thread thread_;
};

}  // namespace scripted
