#include "etcd/protobuf.h"

namespace cxxrun::etcd::protobuf {
namespace {

constexpr int kMaxVarintBytes = 10;  // 64 bits, 7 at a time

const char* type_name(WireType type) {
  switch (type) {
    case WireType::varint: return "varint";
    case WireType::fixed64: return "fixed64";
    case WireType::length_delimited: return "length-delimited";
    case WireType::fixed32: return "fixed32";
  }
  return "?";
}

[[noreturn]] void wrong_type(const Field& field, WireType wanted) {
  throw Malformed("malformed answer: field " + std::to_string(field.number) + " is " + type_name(field.type) +
                  ", not " + type_name(wanted));
}

uint64_t read_varint(std::string_view& in) {
  uint64_t value = 0;
  for (int i = 0; i < kMaxVarintBytes; ++i) {
    if (i >= static_cast<int>(in.size())) throw Malformed("malformed answer: a varint cut short");
    const auto byte = static_cast<unsigned char>(in[i]);
    // The tenth byte holds bit 63 alone.
    if (i == kMaxVarintBytes - 1 && byte > 1) throw Malformed("malformed answer: a varint beyond 64 bits");
    value |= static_cast<uint64_t>(byte & 0x7f) << (7 * i);
    if (!(byte & 0x80)) {
      in.remove_prefix(i + 1);
      return value;
    }
  }
  throw Malformed("malformed answer: a varint beyond 64 bits");
}

uint64_t read_fixed(std::string_view& in, size_t size) {
  if (in.size() < size) throw Malformed("malformed answer: a fixed-size field cut short");
  uint64_t value = 0;
  for (size_t i = 0; i < size; ++i) value |= static_cast<uint64_t>(static_cast<unsigned char>(in[i])) << (8 * i);
  in.remove_prefix(size);
  return value;
}

}  // namespace

void append_varint(std::string& out, uint64_t value) {
  while (value >= 0x80) {
    out.push_back(static_cast<char>((value & 0x7f) | 0x80));
    value >>= 7;
  }
  out.push_back(static_cast<char>(value));
}

void Writer::tag(uint32_t field, WireType type) {
  append_varint(out_, (static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(type));
}

Writer& Writer::varint(uint32_t field, uint64_t value) { return value == 0 ? *this : varint_always(field, value); }

Writer& Writer::bytes(uint32_t field, std::string_view value) {
  return value.empty() ? *this : bytes_always(field, value);
}

Writer& Writer::varint_always(uint32_t field, uint64_t value) {
  tag(field, WireType::varint);
  append_varint(out_, value);
  return *this;
}

Writer& Writer::bytes_always(uint32_t field, std::string_view value) {
  tag(field, WireType::length_delimited);
  append_varint(out_, value.size());
  out_.append(value);
  return *this;
}

uint64_t Field::as_uint64() const {
  if (type != WireType::varint) wrong_type(*this, WireType::varint);
  return value;
}

int64_t Field::as_int64() const { return static_cast<int64_t>(as_uint64()); }

bool Field::as_bool() const { return as_uint64() != 0; }

std::string_view Field::as_bytes() const {
  if (type != WireType::length_delimited) wrong_type(*this, WireType::length_delimited);
  return bytes;
}

std::optional<Field> Reader::next() {
  if (rest_.empty()) return std::nullopt;
  const uint64_t key = read_varint(rest_);
  Field field;
  if ((key >> 3) == 0 || (key >> 3) > UINT32_MAX >> 3)
    throw Malformed("malformed answer: field number " + std::to_string(key >> 3));
  field.number = static_cast<uint32_t>(key >> 3);
  switch (key & 7) {
    case 0:
      field.type = WireType::varint;
      field.value = read_varint(rest_);
      break;
    case 1:
      field.type = WireType::fixed64;
      field.value = read_fixed(rest_, 8);
      break;
    case 2: {
      field.type = WireType::length_delimited;
      const uint64_t length = read_varint(rest_);
      if (length > rest_.size())
        throw Malformed("malformed answer: field " + std::to_string(field.number) + " says " +
                        std::to_string(length) + " bytes where " + std::to_string(rest_.size()) + " are left");
      field.bytes = rest_.substr(0, length);
      rest_.remove_prefix(length);
      break;
    }
    case 5:
      field.type = WireType::fixed32;
      field.value = read_fixed(rest_, 4);
      break;
    default:
      throw Malformed("malformed answer: field " + std::to_string(field.number) + " has wire type " +
                      std::to_string(key & 7));
  }
  return field;
}

}  // namespace cxxrun::etcd::protobuf
