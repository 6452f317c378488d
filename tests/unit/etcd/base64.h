// Standard base64 with padding (RFC 4648 §4): how etcd's JSON gateway
// carries every key and value (proto3 JSON's encoding of bytes fields).
// Test-side only: the client speaks protobuf, but the unit tests still
// script the fake member in the gateway's JSON (gateway_json.h), whose keys
// and values they write and read with these. The namespace and the include
// path ("etcd/base64.h", found under tests/unit/) are those it had in the
// product, so the tests that use it did not change.
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
