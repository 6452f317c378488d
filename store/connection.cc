#include "store/connection.h"

#include <unistd.h>

#include <bit>
#include <cstring>
#include <string>

#include "store/auth.h"
#include "store/wire.h"

namespace cxxrun::store {
namespace {

static_assert(std::endian::native == std::endian::little,
              "the TCPStore wire format is the host order of little-endian machines");

// Larger than any value a server accepts (wire::kMaxValueBytes, or what a
// 1.13 server was fed); a length beyond it means the stream is out of step.
constexpr uint64_t kMaxResponseBytes = uint64_t{1} << 30;

template <class T>
T read_raw(const io::Socket& sock, io::Deadline deadline) {
  T v;
  char buf[sizeof v];
  io::recv_exact(sock, buf, sizeof buf, deadline);
  std::memcpy(&v, buf, sizeof v);
  return v;
}

}  // namespace

StoreConnection StoreConnection::open(const std::string& host, int port, Protocol protocol,
                                      io::Deadline deadline, const std::string& token) {
  StoreConnection conn(io::connect_tcp(host, port, deadline));
  conn.local_address_ = io::local_ip(conn.sock_);
  // torch >= 2.2 clients open with both in one go; the server answers only
  // the PING, so its echo proves the whole handshake arrived.
  const auto nonce = static_cast<uint32_t>(getpid());
  std::string validate;
  if (protocol == Protocol::modern) {
    validate = Request(static_cast<uint8_t>(wire::Op::validate)).u32(wire::kValidateMagic).bytes();
    validate.append(Request(static_cast<uint8_t>(wire::Op::ping)).u32(nonce).bytes());
  }
  if (!token.empty()) conn.authenticate(token, validate, deadline);
  if (protocol == Protocol::modern) {
    const std::string hint =
        " (a torch <= 2.0 store needs the legacy protocol; a store with a token refuses clients without it)";
    uint32_t echo = 0;
    try {
      if (token.empty()) io::send_all(conn.sock_, validate, deadline);
      echo = conn.read_u32(deadline);
    } catch (const io::SocketTimeout&) {
      throw io::SocketTimeout("no answer to the VALIDATE+PING handshake" + hint);
    } catch (const io::SocketError& e) {
      throw StoreHandshakeBroken("handshake failed: " + std::string(e.what()) + hint);
    }
    if (echo != nonce)
      throw StoreProtocolError("PING echoed " + std::to_string(echo) + " instead of " +
                               std::to_string(nonce));
  }
  return conn;
}

void StoreConnection::authenticate(const std::string& token, const std::string& then, io::Deadline deadline) {
  std::string nonce;
  uint8_t answer = 0;
  try {
    io::send_all(sock_, Request(static_cast<uint8_t>(wire::AuthOp::begin)).u32(wire::kAuthVersion).bytes(),
                 deadline);
    const auto length = read_raw<uint64_t>(sock_, deadline);
    if (length == 0)
      throw StoreAuthError(
          "authentication failed: the store takes no token, but this client has one (a store started "
          "without its token, or the wrong store)");
    if (length != auth::kNonceBytes)
      throw StoreProtocolError("AUTH answered a nonce of " + std::to_string(length) + " bytes");
    nonce.resize(length);
    io::recv_exact(sock_, nonce.data(), nonce.size(), deadline);
    std::string bytes(Request(static_cast<uint8_t>(wire::AuthOp::prove)).str(auth::proof(token, nonce)).bytes());
    io::send_all(sock_, bytes + then, deadline);
    answer = read_u8(deadline);
  } catch (const io::SocketTimeout&) {
    throw io::SocketTimeout("no answer to the AUTH handshake");
  } catch (const io::SocketError& e) {
    throw StoreAuthBroken("authentication failed: the connection broke during the AUTH handshake (" +
                          std::string(e.what()) + "); is it a cxxrun store with a token?");
  }
  if (answer == static_cast<uint8_t>(wire::AuthResponse::refused))
    throw StoreAuthError("authentication failed: the store refused this client's token");
  if (answer != static_cast<uint8_t>(wire::AuthResponse::ok))
    throw StoreProtocolError("AUTH answered " + std::to_string(answer));
}

uint8_t StoreConnection::read_u8(io::Deadline deadline) {
  return read_raw<uint8_t>(sock_, deadline);
}
uint32_t StoreConnection::read_u32(io::Deadline deadline) {
  return read_raw<uint32_t>(sock_, deadline);
}
int64_t StoreConnection::read_i64(io::Deadline deadline) {
  return read_raw<int64_t>(sock_, deadline);
}

std::string StoreConnection::read_bytes(io::Deadline deadline) {
  auto size = read_raw<uint64_t>(sock_, deadline);
  if (size > kMaxResponseBytes)
    throw StoreProtocolError("the server sent a value of " + std::to_string(size) +
                             " bytes: the connection is out of step");
  std::string value(size, '\0');
  io::recv_exact(sock_, value.data(), size, deadline);
  return value;
}

}  // namespace cxxrun::store
