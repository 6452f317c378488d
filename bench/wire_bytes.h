// The TCPStore wire bytes the load generators write themselves
// (docs/store-protocol.md §2): raw little-endian integers, strings as a u64
// length and the bytes. Kept apart from store/, so that a generator shares no
// code with the server it measures.
#pragma once

#include <cstdint>
#include <string>

namespace bench_wire {

inline void put_u64(std::string& out, uint64_t v) { out.append(reinterpret_cast<const char*>(&v), 8); }

inline void put_bytes(std::string& out, const std::string& s) {
  put_u64(out, s.size());
  out += s;
}

// A modern connection's first request: VALIDATE and torch's magic, no reply.
inline void put_validate(std::string& out) {
  out.push_back(0);
  const uint32_t magic = 0x3C85F7CE;
  out.append(reinterpret_cast<const char*>(&magic), 4);
}

}  // namespace bench_wire
