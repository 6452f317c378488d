// The store's shared secret (docs/store-protocol.md §9): how a token file is
// read, and the cryptography of the challenge-response, all from OpenSSL's
// libcrypto. Only the protocol's sizes are here; OpenSSL stays in auth.cc.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cxxrun::store::auth {

// A fresh challenge per connection: 32 random bytes (RAND_bytes).
inline constexpr size_t kNonceBytes = 32;
// HMAC-SHA256.
inline constexpr size_t kMacBytes = 32;

// A new nonce; throws std::runtime_error if the random generator fails.
std::string make_nonce();

// The proof for `nonce`: HMAC-SHA256 keyed by the token over a fixed label
// and the nonce (the label keeps this MAC from meaning anything elsewhere).
std::string proof(std::string_view token, std::string_view nonce);

// Whether `mac` is the proof for `nonce`, compared in constant time.
bool proof_matches(std::string_view token, std::string_view nonce, std::string_view mac);

// The secret in `path`: its bytes less one trailing newline ("\n" or
// "\r\n"), which an editor adds. Throws std::runtime_error naming the path
// when it cannot be read or holds nothing.
std::string read_token_file(const std::string& path);

}  // namespace cxxrun::store::auth
