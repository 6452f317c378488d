#include "store/request.h"

#include <array>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "store/wire.h"

namespace cxxrun::store {
namespace {

// The wire is little-endian and we copy integers straight out of it.
static_assert(std::endian::native == std::endian::little);

enum class Field : uint8_t { none, key, value, i64, u32, key_list, pair_list };

struct Layout {
  StoreCommand command;
  std::array<Field, 3> fields;
};

// Indexed by opcode; the static_asserts below pin them to wire.h.
constexpr std::array<Layout, 17> kModern = {{
    {StoreCommand::validate, {Field::u32}},
    {StoreCommand::set, {Field::key, Field::value}},
    {StoreCommand::compare_set, {Field::key, Field::value, Field::value}},
    {StoreCommand::get, {Field::key}},
    {StoreCommand::add, {Field::key, Field::i64}},
    {StoreCommand::check, {Field::key_list}},
    {StoreCommand::wait, {Field::key_list}},
    {StoreCommand::get_num_keys, {}},
    {StoreCommand::delete_key, {Field::key}},
    {StoreCommand::append, {Field::key, Field::value}},
    {StoreCommand::multi_get, {Field::key_list}},
    {StoreCommand::multi_set, {Field::pair_list}},
    {StoreCommand::cancel_wait, {}},
    {StoreCommand::ping, {Field::u32}},
    {StoreCommand::queue_push, {Field::key, Field::value}},
    {StoreCommand::queue_pop, {Field::key}},
    {StoreCommand::queue_len, {Field::key}},
}};

constexpr std::array<Layout, 9> kLegacy = {{
    {StoreCommand::set, {Field::key, Field::value}},
    {StoreCommand::compare_set, {Field::key, Field::value, Field::value}},
    {StoreCommand::get, {Field::key}},
    {StoreCommand::add, {Field::key, Field::i64}},
    {StoreCommand::check, {Field::key_list}},
    {StoreCommand::wait, {Field::key_list}},
    {StoreCommand::get_num_keys, {}},
    {StoreCommand::watch_key, {Field::key}},
    {StoreCommand::delete_key, {Field::key}},
}};

constexpr StoreCommand modern(wire::Op op) { return kModern[static_cast<uint8_t>(op)].command; }
constexpr StoreCommand legacy(wire::LegacyOp op) { return kLegacy[static_cast<uint8_t>(op)].command; }
static_assert(modern(wire::Op::validate) == StoreCommand::validate);
static_assert(modern(wire::Op::add) == StoreCommand::add);
static_assert(modern(wire::Op::delete_key) == StoreCommand::delete_key);
static_assert(modern(wire::Op::cancel_wait) == StoreCommand::cancel_wait);
static_assert(modern(wire::Op::ping) == StoreCommand::ping);
static_assert(modern(wire::Op::queue_len) == StoreCommand::queue_len);
static_assert(legacy(wire::LegacyOp::set) == StoreCommand::set);
static_assert(legacy(wire::LegacyOp::get_num_keys) == StoreCommand::get_num_keys);
static_assert(legacy(wire::LegacyOp::watch_key) == StoreCommand::watch_key);
static_assert(legacy(wire::LegacyOp::delete_key) == StoreCommand::delete_key);

constexpr std::array<uint8_t, 5> kValidatePrefix = {0x00, 0xCE, 0xF7, 0x85, 0x3C};
static_assert(kValidatePrefix[1] == (wire::kValidateMagic & 0xFF));
static_assert(kValidatePrefix[4] == (wire::kValidateMagic >> 24));

// Walks fields over the buffered bytes. With out == nullptr it only measures,
// so a request that has not fully arrived costs no copies however often the
// server retries it.
class Reader {
 public:
  Reader(std::string_view in, size_t pos) : in_(in), pos_(pos) {}

  size_t pos() const { return pos_; }
  size_t needed() const { return needed_; }
  const std::string& error() const { return error_; }

  // Each returns false when the field is not all there (needed() says how
  // much is) or breaks a limit (error() says which).
  bool u32(uint32_t* out) { return scalar(out); }
  bool i64(int64_t* out) { return scalar(out); }

  bool count(const char* op, uint64_t* n) {
    if (!scalar(n)) return false;
    if (*n > wire::kMaxKeysPerOp) {
      error_ = fmt::format("{} keys in one {} exceed the limit of {}", *n, op, wire::kMaxKeysPerOp);
      return false;
    }
    return true;
  }

  bool bytes(const char* what, size_t limit, std::string* out) {
    uint64_t length = 0;
    if (!scalar(&length)) return false;
    if (length > limit) {
      error_ = fmt::format("{} of {} bytes exceeds the limit of {} bytes", what, length, limit);
      return false;
    }
    const char* data = nullptr;
    if (!take(length, &data)) return false;
    if (out != nullptr) out->assign(data, length);
    return true;
  }

 private:
  template <typename T>
  bool scalar(T* out) {
    const char* data = nullptr;
    if (!take(sizeof(T), &data)) return false;
    std::memcpy(out, data, sizeof(T));
    return true;
  }

  bool take(uint64_t n, const char** data) {
    if (n > wire::kMaxRequestBytes - pos_) {
      error_ = fmt::format("request of at least {} bytes exceeds the limit of {} bytes", pos_ + n,
                           wire::kMaxRequestBytes);
      return false;
    }
    if (in_.size() - pos_ < n) {
      needed_ = pos_ + n;
      return false;
    }
    *data = in_.data() + pos_;
    pos_ += n;
    return true;
  }

  std::string_view in_;
  size_t pos_;
  size_t needed_ = 0;
  std::string error_;
};

bool read_field(Reader& r, Field field, StoreCommand command, const RequestLimits& limits,
                StoreRequest* out) {
  std::string* key = nullptr;
  std::string* value = nullptr;
  if (out != nullptr && field == Field::key) key = &out->keys.emplace_back();
  if (out != nullptr && field == Field::value) value = &out->values.emplace_back();
  uint64_t n = 0;
  switch (field) {
    case Field::none:
      return true;
    case Field::key:
      return r.bytes("key", wire::kMaxKeyBytes, key);
    case Field::value:
      return r.bytes("value", limits.max_value_bytes, value);
    case Field::i64: {
      int64_t scratch = 0;
      return r.i64(out != nullptr ? &out->delta : &scratch);
    }
    case Field::u32: {
      uint32_t scratch = 0;
      return r.u32(out != nullptr ? &out->nonce : &scratch);
    }
    case Field::key_list:
    case Field::pair_list:
      if (!r.count(store_command_name(command), &n)) return false;
      // Reserving is safe only now that every byte is known to be there.
      if (out != nullptr) out->keys.reserve(n);
      if (out != nullptr && field == Field::pair_list) out->values.reserve(n);
      for (uint64_t i = 0; i < n; ++i) {
        if (!r.bytes("key", wire::kMaxKeyBytes, out ? &out->keys.emplace_back() : nullptr))
          return false;
        if (field == Field::pair_list &&
            !r.bytes("value", limits.max_value_bytes, out ? &out->values.emplace_back() : nullptr))
          return false;
      }
      return true;
  }
  return false;
}

// Walks one request's fields; fills `out` when given.
bool read_fields(Reader& r, const Layout& layout, const RequestLimits& limits, StoreRequest* out) {
  for (Field field : layout.fields)
    if (!read_field(r, field, layout.command, limits, out)) return false;
  return true;
}

RequestParse need_more(size_t bytes, OpTable table) {
  RequestParse result;
  result.status = RequestParse::Status::need_more;
  result.table = table;
  result.needed = bytes;
  return result;
}

RequestParse fail(std::string error, OpTable table) {
  RequestParse result;
  result.status = RequestParse::Status::error;
  result.table = table;
  result.error = std::move(error);
  return result;
}

// The table a fresh connection speaks, or unknown while its bytes so far are
// a prefix of VALIDATE + magic.
OpTable detect(std::string_view in) {
  for (size_t i = 0; i < kValidatePrefix.size(); ++i) {
    if (i == in.size()) return OpTable::unknown;
    if (static_cast<uint8_t>(in[i]) != kValidatePrefix[i]) return OpTable::legacy;
  }
  return OpTable::modern;
}

}  // namespace

const char* store_command_name(StoreCommand command) {
  switch (command) {
    case StoreCommand::validate: return "VALIDATE";
    case StoreCommand::set: return "SET";
    case StoreCommand::compare_set: return "COMPARE_SET";
    case StoreCommand::get: return "GET";
    case StoreCommand::add: return "ADD";
    case StoreCommand::check: return "CHECK";
    case StoreCommand::wait: return "WAIT";
    case StoreCommand::get_num_keys: return "GETNUMKEYS";
    case StoreCommand::delete_key: return "DELETE_KEY";
    case StoreCommand::append: return "APPEND";
    case StoreCommand::multi_get: return "MULTI_GET";
    case StoreCommand::multi_set: return "MULTI_SET";
    case StoreCommand::cancel_wait: return "CANCEL_WAIT";
    case StoreCommand::ping: return "PING";
    case StoreCommand::queue_push: return "QUEUE_PUSH";
    case StoreCommand::queue_pop: return "QUEUE_POP";
    case StoreCommand::queue_len: return "QUEUE_LEN";
    case StoreCommand::watch_key: return "WATCH_KEY";
  }
  return "?";
}

RequestParse parse_request(std::string_view in, OpTable table, const RequestLimits& limits) {
  if (in.empty()) return need_more(1, table);
  if (table == OpTable::unknown) {
    table = detect(in);
    if (table == OpTable::unknown) return need_more(kValidatePrefix.size(), table);
  }

  uint8_t opcode = static_cast<uint8_t>(in[0]);
  const Layout* layout = nullptr;
  if (table == OpTable::modern && opcode < kModern.size()) layout = &kModern[opcode];
  if (table == OpTable::legacy && opcode < kLegacy.size()) layout = &kLegacy[opcode];
  if (layout == nullptr)
    return fail(fmt::format("unknown opcode {} ({} table)", opcode,
                            table == OpTable::modern ? "modern" : "legacy"),
                table);

  Reader measure(in, 1);
  if (!read_fields(measure, *layout, limits, nullptr)) {
    if (!measure.error().empty())
      return fail(fmt::format("{}: {}", store_command_name(layout->command), measure.error()), table);
    return need_more(measure.needed(), table);
  }

  RequestParse result;
  result.status = RequestParse::Status::complete;
  result.table = table;
  result.consumed = measure.pos();
  result.request.command = layout->command;
  Reader extract(in, 1);
  read_fields(extract, *layout, limits, &result.request);

  if (layout->command == StoreCommand::validate && result.request.nonce != wire::kValidateMagic)
    return fail(fmt::format("VALIDATE magic {:#010x} is not {:#010x}", result.request.nonce,
                            wire::kValidateMagic),
                table);
  return result;
}

}  // namespace cxxrun::store
