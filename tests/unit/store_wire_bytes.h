// Builds TCPStore requests and expected replies byte by byte (framing in
// docs/store-protocol.md §2), independently of the server's own encoder, so
// the tests check the wire and not the code against itself.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "store/wire.h"

namespace store_bytes {

class Msg {
 public:
  explicit Msg(uint8_t op) { bytes_.push_back(static_cast<char>(op)); }
  template <typename Op>
  explicit Msg(Op op) : Msg(static_cast<uint8_t>(op)) {}
  Msg() = default;

  Msg& u8(uint8_t v) { return raw(&v, 1); }
  Msg& u32(uint32_t v) { return raw(&v, sizeof v); }
  Msg& u64(uint64_t v) { return raw(&v, sizeof v); }
  Msg& i64(int64_t v) { return raw(&v, sizeof v); }
  Msg& str(std::string_view s) {
    u64(s.size());
    bytes_.append(s);
    return *this;
  }
  Msg& keys(const std::vector<std::string>& keys) {
    u64(keys.size());
    for (const std::string& k : keys) str(k);
    return *this;
  }
  Msg& then(const Msg& other) {
    bytes_ += other.bytes_;
    return *this;
  }
  operator std::string() const { return bytes_; }
  const std::string& bytes() const { return bytes_; }

 private:
  Msg& raw(const void* p, size_t n) {
    bytes_.append(static_cast<const char*>(p), n);
    return *this;
  }
  std::string bytes_;
};

using cxxrun::store::wire::LegacyOp;
using cxxrun::store::wire::Op;

inline std::string validate() { return Msg(Op::validate).u32(cxxrun::store::wire::kValidateMagic); }

// Replies.
inline std::string i64(int64_t v) { return Msg().i64(v); }
inline std::string u32(uint32_t v) { return Msg().u32(v); }
inline std::string u8(uint8_t v) { return Msg().u8(v); }
inline std::string bytes(std::string_view s) { return Msg().str(s); }
inline const std::string kStopWaiting = u8(0);
inline const std::string kWaitCanceled = u8(1);
inline const std::string kReady = u8(0);
inline const std::string kNotReady = u8(1);
inline const std::string kWatchRegistered = u8(3);
// A legacy WATCH_KEY push.
inline std::string watch_push(uint8_t type, std::string_view key, std::string_view old_value,
                              std::string_view new_value) {
  return Msg().u8(type).str(key).str(old_value).str(new_value);
}

}  // namespace store_bytes
