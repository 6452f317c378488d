// The token handshake one server connection passes before its first request
// (docs/store-protocol.md §9). Pure, like the request parser: bytes in,
// bytes out, no sockets and no logging; the nonce comes from the caller, so
// tests choose it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace cxxrun::store {

class AuthGate {
 public:
  enum class Status : uint8_t {
    need_more,  // wait for `needed` bytes in all
    reply,      // send `reply`, drop `consumed` bytes, call again
    open,       // the handshake is over (or was never needed): drop `consumed`, requests follow
    refuse,     // send `reply` if any, then close the connection: `error` says why
  };
  struct Step {
    Status status = Status::need_more;
    size_t consumed = 0;
    size_t needed = 0;
    std::string reply;
    std::string error;
  };

  // `token` must outlive the gate; empty: the server has none. A client that
  // asks such a server to authenticate is told so (an empty nonce), and
  // every other connection is open from its first byte.
  explicit AuthGate(std::string_view token);

  bool open() const { return state_ == State::open; }

  // Looks at the front of what the connection has buffered since the last
  // step's `consumed`. `make_nonce` is called once, when the challenge is due.
  Step step(std::string_view buffered, const std::function<std::string()>& make_nonce);

 private:
  enum class State : uint8_t { first_byte, begin, prove, open };

  Step begin(std::string_view buffered, const std::function<std::string()>& make_nonce);
  Step prove(std::string_view buffered);

  std::string_view token_;
  State state_;
  std::string nonce_;
};

}  // namespace cxxrun::store
