// The proto3 wire format, as much of it as etcd's messages need: varints,
// tags, length-delimited fields, and a reader that walks a message's fields
// one at a time. No schema and no reflection: etcd/wire.cc knows the field
// numbers (https://protobuf.dev/programming-guides/encoding/).
//
// Promises:
// - Writer writes fields in the order it is called; callers call in
//   field-number order, so the bytes are those protobuf's own serializers
//   produce. A scalar at its default (0, false, empty) is left out, as
//   proto3 does; the *_always calls and message() write it anyway, for
//   oneof members and sub-messages, whose presence is itself the meaning.
// - int64 goes out as its two's complement: a negative one takes 10 bytes.
// - Reader throws Malformed on a varint cut short or longer than 10 bytes, a
//   length past the end of the message, field number 0, a group (wire types
//   3 and 4, proto2 only) or a wire type that does not exist (6, 7). Any
//   other field comes back whole, its length-delimited bytes as a view into
//   the reader's input (no copy), so a field whose number the caller does
//   not know is skipped by ignoring it (forward compatibility).
// - Field's accessors throw Malformed when the field's wire type is not the
//   one asked for: a known field number with the wrong type.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "etcd/errors.h"

namespace cxxrun::etcd::protobuf {

// The bytes are not a protobuf message; the caller adds the endpoint.
struct Malformed : EtcdError {
  using EtcdError::EtcdError;
};

enum class WireType : uint8_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

void append_varint(std::string& out, uint64_t value);

class Writer {
 public:
  // Left out at their default, as proto3 does.
  Writer& varint(uint32_t field, uint64_t value);
  Writer& int64(uint32_t field, int64_t value) { return varint(field, static_cast<uint64_t>(value)); }
  Writer& boolean(uint32_t field, bool value) { return varint(field, value ? 1 : 0); }
  Writer& bytes(uint32_t field, std::string_view value);  // bytes and string fields alike

  // Written even at their default: a oneof member, a sub-message.
  Writer& varint_always(uint32_t field, uint64_t value);
  Writer& bytes_always(uint32_t field, std::string_view value);
  Writer& message(uint32_t field, std::string_view serialized) { return bytes_always(field, serialized); }

  const std::string& data() const { return out_; }
  std::string take() { return std::move(out_); }

 private:
  void tag(uint32_t field, WireType type);
  std::string out_;
};

struct Field {
  uint32_t number = 0;
  WireType type = WireType::varint;
  uint64_t value = 0;      // varint, fixed64, fixed32
  std::string_view bytes;  // length_delimited

  uint64_t as_uint64() const;  // varint
  int64_t as_int64() const;    // varint, two's complement
  bool as_bool() const;        // varint, nonzero
  std::string_view as_bytes() const;  // length_delimited: bytes, string, a sub-message
};

// Reads from bytes that must outlive it and the Fields it returns.
class Reader {
 public:
  explicit Reader(std::string_view message) : rest_(message) {}
  explicit Reader(std::string&&) = delete;  // a temporary would leave the fields dangling
  // The next field, nullopt at the end of the message.
  std::optional<Field> next();

 private:
  std::string_view rest_;
};

}  // namespace cxxrun::etcd::protobuf
