// Standard base64 with padding (RFC 4648 §4): how etcd's JSON gateway
// carries every key and value (proto3 JSON's encoding of bytes fields).
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace cxxrun::etcd {

std::string base64_encode(std::string_view bytes);

// nullopt when `text` is not base64: a length not a multiple of four, a
// character outside the alphabet, padding anywhere but the end. The gateway
// also accepts the URL-safe alphabet ('-', '_') on input, so we do too.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace cxxrun::etcd
