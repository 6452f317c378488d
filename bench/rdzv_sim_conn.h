// One simulated agent's connection to the TCPStore (bench/rdzv_sim.cc): the
// bytes it has to send and has received, the one reply it waits for, and
// its requests and replies in torch's modern wire bytes
// (docs/store-protocol.md §2). Passive: the generator's epoll loop moves the
// bytes; a request only appends to `out` and says what reply to expect.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "wire_bytes.h"

namespace rdzv_sim {

enum Op : uint8_t {
  kValidate = 0, kSet = 1, kCas = 2, kGet = 3, kAdd = 4, kWait = 6, kAppend = 9, kMultiGet = 10, kMultiSet = 11
};
enum class Reply { none, bytes, i64, u8, list };

// get_if_set's COMPARE_SET (store/client.cc): expects and desires a value no one stores.
inline const std::string kNeverStored("\0cxxrun:absent\0", 15);

struct StoreConn {
  int fd = -1;
  std::string out, in;
  Reply want = Reply::none;
  size_t list_n = 0;      // Reply::list: how many values
  bool polls_out = true;  // registered for EPOLLOUT (the generator registers it so)

  void cas(const std::string& k, const std::string& expected, const std::string& desired) {
    out.push_back(kCas), put(k), put(expected), put(desired);
    want = Reply::bytes;
  }
  // StoreClient::get_if_set: one COMPARE_SET that writes nothing.
  void get_if_set(const std::string& k) { cas(k, kNeverStored, kNeverStored); }
  void set(const std::string& k, const std::string& v) { out.push_back(kSet), put(k), put(v); }
  void add(const std::string& k, int64_t delta) {
    out.push_back(kAdd), put(k), bench_wire::put_u64(out, static_cast<uint64_t>(delta)), want = Reply::i64;
  }
  void get(const std::string& k) { out.push_back(kGet), put(k), want = Reply::bytes; }
  void wait(const std::vector<std::string>& keys) {
    out.push_back(kWait), bench_wire::put_u64(out, keys.size());
    for (const auto& k : keys) put(k);
    want = Reply::u8;
  }
  void append(const std::string& k, const std::string& v) { out.push_back(kAppend), put(k), put(v); }
  void multi_get(const std::vector<std::string>& keys) {
    out.push_back(kMultiGet), bench_wire::put_u64(out, keys.size());
    for (const auto& k : keys) put(k);
    want = Reply::list;
    list_n = keys.size();
  }
  // MULTI_SET of `pairs` keys and values, each written with put() after this.
  void multi_set(size_t pairs) { out.push_back(kMultiSet), bench_wire::put_u64(out, pairs); }
  void put(const std::string& s) { bench_wire::put_bytes(out, s); }

  // One reply of `want` off the front of `in`, if it is all there.
  bool take(std::vector<std::string>& values, int64_t& number) {
    size_t at = 0;
    auto need = [&](size_t n) { return in.size() >= at + n; };
    auto read_u64 = [&] {
      uint64_t v;
      memcpy(&v, in.data() + at, 8);
      at += 8;
      return v;
    };
    switch (want) {
      case Reply::none: return false;
      case Reply::u8:
        if (!need(1)) return false;
        at = 1;
        break;
      case Reply::i64:
        if (!need(8)) return false;
        number = static_cast<int64_t>(read_u64());
        break;
      case Reply::bytes:
      case Reply::list: {
        const size_t n = want == Reply::bytes ? 1 : list_n;
        std::vector<std::string> got;
        for (size_t k = 0; k < n; ++k) {
          if (!need(8)) return false;
          const uint64_t len = read_u64();
          if (!need(len)) return false;
          got.emplace_back(in.data() + at, len);
          at += len;
        }
        values = std::move(got);
        break;
      }
    }
    in.erase(0, at);
    want = Reply::none;
    return true;
  }
};

}  // namespace rdzv_sim
