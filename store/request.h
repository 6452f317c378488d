// Decoding TCPStore requests (docs/store-protocol.md §2-§4) from the bytes a
// connection has buffered so far. Pure: no sockets, no logging, no state
// beyond what the caller passes in, so the server, the unit tests and the
// fuzzer all drive the same code.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store/wire.h"

namespace cxxrun::store {

// Which opcode table a connection speaks. Decided once, on its first bytes:
// VALIDATE + magic means modern, anything else legacy (docs/store-protocol.md §1).
enum class OpTable : uint8_t { unknown, modern, legacy };

// Both tables decoded into one vocabulary; watch_key exists only in legacy,
// validate and everything from append on only in modern.
enum class StoreCommand : uint8_t {
  validate,
  set,
  compare_set,
  get,
  add,
  check,
  wait,
  get_num_keys,
  delete_key,
  append,
  multi_get,
  multi_set,
  cancel_wait,
  ping,
  queue_push,
  queue_pop,
  queue_len,
  watch_key,
};

const char* store_command_name(StoreCommand command);

struct StoreRequest {
  StoreCommand command = StoreCommand::ping;
  // One key for single-key commands; n for check/wait/multi_get/multi_set.
  std::vector<std::string> keys;
  // set/append/queue_push: the value; compare_set: expected then desired;
  // multi_set: one per key.
  std::vector<std::string> values;
  int64_t delta = 0;   // add
  uint32_t nonce = 0;  // ping's nonce, validate's magic
};

struct RequestParse {
  enum class Status : uint8_t { complete, need_more, error };
  Status status = Status::need_more;
  // The connection's table from now on (set when it was unknown and the
  // first bytes decided it; unchanged while they cannot decide yet).
  OpTable table = OpTable::unknown;
  // complete: how many bytes the request took from the front of the buffer.
  size_t consumed = 0;
  // need_more: do not parse again before the buffer holds this many bytes.
  // Lengths are checked against the limits as soon as they arrive, so this
  // never exceeds wire::kMaxRequestBytes.
  size_t needed = 0;
  StoreRequest request;
  std::string error;  // error: one line for the log
};

// The limits a server may set (docs/store-protocol.md §5); the key limit,
// the keys per request and the request size are fixed (wire.h).
struct RequestLimits {
  // Longest value in SET, APPEND, COMPARE_SET, MULTI_SET and QUEUE_PUSH; at
  // most wire::kMaxRequestBytes, which bounds the request around it anyway.
  size_t max_value_bytes = wire::kMaxValueBytes;
};

// Parses the request at the front of `buffered`. An error (unknown opcode,
// bad VALIDATE magic, a field over a limit) means the connection cannot be
// resynchronised and must be closed.
RequestParse parse_request(std::string_view buffered, OpTable table, const RequestLimits& limits = {});

}  // namespace cxxrun::store
