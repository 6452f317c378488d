// One TCP connection to a TCPStore-compatible server, speaking the framing of
// docs/store-protocol.md §2: a request is built whole and leaves in one write (like
// torch's SendBuffer), a response is read field by field. Retries, deadlines
// per call and the meaning of each op belong to the client above.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "net/socket_io.h"
#include "store/client_errors.h"
#include "store/client_protocol.h"

namespace cxxrun::store {

// The sockets under the store client are net/'s.
namespace io = net::io;

// The server answered, but not the way this protocol says it would (a wrong
// PING echo, an impossible length): retrying on a new connection would only
// repeat it.
struct StoreProtocolError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// TCP connected but the connection broke during the VALIDATE + PING
// handshake: what a torch <= 2.0 server does (it reads VALIDATE as a SET
// with an absurd key length and drops us). The message says so.
struct StoreHandshakeBroken : io::SocketError {
  using io::SocketError::SocketError;
};
// The connection broke during the token handshake: what a server that does
// not know AUTH (torch's) does. Worth a retry or two, like the above.
struct StoreAuthBroken : StoreHandshakeBroken {
  using StoreHandshakeBroken::StoreHandshakeBroken;
};

class Request {
 public:
  explicit Request(uint8_t op) { bytes_.push_back(static_cast<char>(op)); }
  // Starts another request behind this one, to leave in the same write (a
  // pipelined batch: the server answers each in order).
  Request& then(uint8_t op) {
    bytes_.push_back(static_cast<char>(op));
    return *this;
  }
  Request& u32(uint32_t v) { return raw(&v, sizeof v); }
  Request& u64(uint64_t v) { return raw(&v, sizeof v); }
  Request& i64(int64_t v) { return raw(&v, sizeof v); }
  Request& str(std::string_view s) {
    u64(s.size());
    bytes_.append(s);
    return *this;
  }
  std::string_view bytes() const { return bytes_; }

 private:
  // Host order is the wire order: torch writes raw integers and every
  // platform it runs on is little-endian (static_assert in the .cc).
  Request& raw(const void* p, size_t n) {
    bytes_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string bytes_;
};

class StoreConnection {
 public:
  // Connects once (the caller retries); with a token, authenticates
  // (docs/store-protocol.md §9); for Protocol::modern, sends VALIDATE +
  // PING(pid) and checks the echo. Throws io::SocketError /
  // io::SocketTimeout, StoreHandshakeBroken (StoreAuthBroken during AUTH),
  // StoreAuthError when the token is refused, or StoreProtocolError on a
  // wrong echo.
  static StoreConnection open(const std::string& host, int port, Protocol protocol,
                              io::Deadline deadline, const std::string& token = {});

  // `sent` counts bytes the kernel took, as for io::send_all.
  void send(const Request& request, io::Deadline deadline, size_t* sent = nullptr) {
    io::send_all(sock_, request.bytes(), deadline, sent);
  }
  uint8_t read_u8(io::Deadline deadline);
  uint32_t read_u32(io::Deadline deadline);
  int64_t read_i64(io::Deadline deadline);
  std::string read_bytes(io::Deadline deadline);

  bool wait_readable(io::Deadline deadline) { return io::wait_readable(sock_, deadline); }
  // Bytes or EOF waiting while no request is outstanding: the server went
  // away, or answered something we no longer wait for. Either way, unusable.
  bool stale() { return io::input_pending(sock_); }

  const std::string& local_address() const { return local_address_; }

 private:
  explicit StoreConnection(io::Socket sock) : sock_(std::move(sock)) {}
  // The token handshake; `then` (the VALIDATE + PING, if any) leaves with
  // the proof, saving a round trip.
  void authenticate(const std::string& token, const std::string& then, io::Deadline deadline);

  io::Socket sock_;
  std::string local_address_;
};

}  // namespace cxxrun::store
