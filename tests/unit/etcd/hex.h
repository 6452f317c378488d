// Bytes as lowercase hex and back, for the golden protobuf bytes of the
// etcd tests: a mismatch prints as two hex strings a reader can diff.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace etcd_hex {

inline std::string hex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

// Spaces are ignored, so long literals may be grouped.
inline std::string unhex(std::string_view text) {
  auto digit = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    throw std::invalid_argument(std::string("not a hex digit: ") + c);
  };
  std::string out;
  int high = -1;
  for (char c : text) {
    if (c == ' ') continue;
    if (high < 0) {
      high = digit(c);
    } else {
      out += static_cast<char>(high << 4 | digit(c));
      high = -1;
    }
  }
  if (high >= 0) throw std::invalid_argument("an odd number of hex digits");
  return out;
}

}  // namespace etcd_hex
