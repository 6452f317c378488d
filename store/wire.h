// PyTorch's TCPStore wire protocol (docs/store-protocol.md §2-§3), shared by our
// store server and client. Integers are raw little-endian; strings and byte
// vectors are a u64 length followed by the bytes.
#pragma once

#include <chrono>

#include <cstddef>
#include <cstdint>

namespace cxxrun::store::wire {

// torch >= 2.2: a connection opens with VALIDATE + this magic.
inline constexpr uint32_t kValidateMagic = 0x3C85F7CE;

// Limits of torch's libuv server (docs/store-protocol.md §5): a request beyond them closes that
// one connection.
inline constexpr size_t kMaxKeyBytes = 8 * 1024;
inline constexpr size_t kMaxValueBytes = 8 * 1024 * 1024;
inline constexpr size_t kMaxKeysPerOp = 131072;

// Our own bound, not torch's: a request, or a MULTI_GET reply, larger than
// this closes the connection, so one client cannot make the server buffer
// without limit (the per-field limits alone allow terabytes in one MULTI_SET).
inline constexpr size_t kMaxRequestBytes = 64 * 1024 * 1024;

// Our own bound on what one server holds for all its connections together:
// requests still arriving plus replies not yet sent (StoreServerOptions).
inline constexpr size_t kDefaultMemoryLimit = 256 * 1024 * 1024;

// torch's TCPStore port, and so MASTER_PORT's default (--master-port).
inline constexpr int kDefaultPort = 29500;

// The modern table (torch >= 2.2).
enum class Op : uint8_t {
  validate = 0,
  set = 1,
  compare_set = 2,
  get = 3,
  add = 4,
  check = 5,
  wait = 6,
  get_num_keys = 7,
  delete_key = 8,
  append = 9,
  multi_get = 10,
  multi_set = 11,
  cancel_wait = 12,
  ping = 13,
  queue_push = 14,
  queue_pop = 15,
  queue_len = 16,
};

// The legacy table (torch <= 2.0, e.g. Debian's 1.13).
enum class LegacyOp : uint8_t {
  set = 0,
  compare_set = 1,
  get = 2,
  add = 3,
  check = 4,
  wait = 5,
  get_num_keys = 6,
  watch_key = 7,
  delete_key = 8,
};

// cxxrun's own: the token handshake a server with a token requires before
// any request (docs/store-protocol.md §9). Far above both torch tables, so a
// torch client never sends them and a token-less server can tell them apart.
enum class AuthOp : uint8_t { begin = 0xC0, prove = 0xC1 };
inline constexpr uint32_t kAuthVersion = 1;
// How long a connection to a store with a token may take to prove it
// (docs/store-protocol.md §9). The handshake is one round trip; a client
// that stays silent past this is closed, so silent connections cannot hold
// the server's descriptors.
inline constexpr std::chrono::milliseconds kAuthDeadline{10'000};
enum class AuthResponse : uint8_t { ok = 0, refused = 1 };

enum class CheckResponse : uint8_t { ready = 0, not_ready = 1 };
enum class WaitResponse : uint8_t { stop_waiting = 0, wait_canceled = 1 };
// Legacy WATCH_KEY: the registration reply, then one push per change.
enum class WatchResponse : uint8_t {
  key_updated = 0,
  key_created = 1,
  key_deleted = 2,
  callback_registered = 3,
};

}  // namespace cxxrun::store::wire
