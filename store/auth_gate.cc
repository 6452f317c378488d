#include "store/auth_gate.h"

#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "store/auth.h"
#include "store/wire.h"

namespace cxxrun::store {
namespace {

static_assert(std::endian::native == std::endian::little);

constexpr auto kBegin = static_cast<uint8_t>(wire::AuthOp::begin);
constexpr auto kProve = static_cast<uint8_t>(wire::AuthOp::prove);
// AUTH_BEGIN: opcode, u32 version. AUTH_PROVE: opcode, u64 length, the MAC.
constexpr size_t kBeginBytes = 1 + 4;
constexpr size_t kProveHeader = 1 + 8;
constexpr size_t kProveBytes = kProveHeader + auth::kMacBytes;

template <class T>
T read_le(std::string_view in, size_t at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof v);
  return v;
}

std::string byte_string(std::string_view bytes) {
  uint64_t length = bytes.size();
  std::string out(reinterpret_cast<const char*>(&length), sizeof length);
  out.append(bytes);
  return out;
}

AuthGate::Step need(size_t bytes) {
  AuthGate::Step s;
  s.needed = bytes;
  return s;
}

AuthGate::Step refuse(std::string error, std::string reply = {}) {
  AuthGate::Step s;
  s.status = AuthGate::Status::refuse;
  s.error = std::move(error);
  s.reply = std::move(reply);
  return s;
}

AuthGate::Step done(AuthGate::Status status, size_t consumed, std::string reply = {}) {
  AuthGate::Step s;
  s.status = status;
  s.consumed = consumed;
  s.reply = std::move(reply);
  return s;
}

}  // namespace

AuthGate::AuthGate(std::string_view token) : token_(token), state_(token.empty() ? State::first_byte : State::begin) {}

AuthGate::Step AuthGate::step(std::string_view in, const std::function<std::string()>& make_nonce) {
  if (in.empty()) return need(1);
  switch (state_) {
    case State::first_byte:
      // No token here: only a client that asks to authenticate needs telling.
      if (static_cast<uint8_t>(in[0]) != kBegin) {
        state_ = State::open;
        return done(Status::open, 0);
      }
      if (in.size() < kBeginBytes) return need(kBeginBytes);
      state_ = State::open;
      return done(Status::reply, kBeginBytes, byte_string(""));
    case State::begin:
      return begin(in, make_nonce);
    case State::prove:
      return prove(in);
    case State::open:
      break;
  }
  return done(Status::open, 0);
}

AuthGate::Step AuthGate::begin(std::string_view in, const std::function<std::string()>& make_nonce) {
  const auto opcode = static_cast<uint8_t>(in[0]);
  if (opcode != kBegin)
    return refuse(fmt::format("not authenticated: the store requires a token, and the connection sent "
                              "opcode {} instead of AUTH (a client without the token, or torch's)",
                              opcode));
  if (in.size() < kBeginBytes) return need(kBeginBytes);
  const auto version = read_le<uint32_t>(in, 1);
  if (version != wire::kAuthVersion)
    return refuse(fmt::format("AUTH version {} is not supported (only {})", version, wire::kAuthVersion));
  nonce_ = make_nonce();
  state_ = State::prove;
  return done(Status::reply, kBeginBytes, byte_string(nonce_));
}

AuthGate::Step AuthGate::prove(std::string_view in) {
  const auto opcode = static_cast<uint8_t>(in[0]);
  if (opcode != kProve)
    return refuse(fmt::format("not authenticated: opcode {} instead of the AUTH proof", opcode));
  if (in.size() < kProveHeader) return need(kProveHeader);
  const auto length = read_le<uint64_t>(in, 1);
  if (length != auth::kMacBytes)
    return refuse(fmt::format("AUTH proof of {} bytes, not {}", length, auth::kMacBytes));
  if (in.size() < kProveBytes) return need(kProveBytes);
  const std::string refused(1, static_cast<char>(wire::AuthResponse::refused));
  if (!auth::proof_matches(token_, nonce_, in.substr(kProveHeader, auth::kMacBytes)))
    return refuse("authentication failed: wrong token", refused);
  state_ = State::open;
  return done(Status::reply, kProveBytes, std::string(1, static_cast<char>(wire::AuthResponse::ok)));
}

}  // namespace cxxrun::store
