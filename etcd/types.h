// The values the etcd client exchanges, as plain structs. Keys and values are
// bytes in std::string (any byte, NUL included); revisions, versions and
// lease ids are etcd's int64s. A field etcd leaves out is 0 or empty.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace cxxrun::etcd {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t version = 0;  // writes since the key was (re)created; 1 after the first
  int64_t lease = 0;    // 0: not attached to a lease
};

// `revision` is the store's revision when the member answered (the header's):
// a watch started at revision + 1 misses nothing that came after the read.
struct GetResult {
  int64_t revision = 0;
  std::optional<KeyValue> kv;
};

struct RangeResult {
  int64_t revision = 0;
  std::vector<KeyValue> kvs;  // sorted by key, as etcd returns them
  bool more = false;          // a page: keys after the last one remain in the range
};

struct CountResult {
  int64_t revision = 0;
  int64_t count = 0;
};

// One condition of a transaction, on one key. A key that does not exist has
// version, create_revision and mod_revision 0 and compares as such, so
// Compare::create_revision(k, equal, 0) is "k is absent".
struct Compare {
  enum class Target { value, version, create_revision, mod_revision };
  enum class Result { equal, not_equal, greater, less };

  std::string key;
  Target target = Target::value;
  Result result = Result::equal;
  std::string value;   // for Target::value
  int64_t number = 0;  // for the other targets

  static Compare value_is(std::string key, Result result, std::string value);
  static Compare version_is(std::string key, Result result, int64_t version);
  static Compare create_revision_is(std::string key, Result result, int64_t revision);
  static Compare mod_revision_is(std::string key, Result result, int64_t revision);
};

// One operation inside a transaction. range_end empty: the key alone;
// otherwise the half-open range [key, range_end) (see prefix_range_end).
struct Op {
  enum class Kind { put, range, delete_range, txn };

  Kind kind = Kind::range;
  std::string key;
  std::string range_end;
  std::string value;  // put
  int64_t lease = 0;  // put
  // txn: a transaction inside the outer one (etcd 3.3 on), applied with
  // it or not at all: its own compares pick its branch. No key may be
  // written twice across the whole request.
  std::vector<Compare> compares;
  std::vector<Op> success, failure;

  static Op put(std::string key, std::string value, int64_t lease = 0);
  static Op txn(std::vector<Compare> compares, std::vector<Op> success, std::vector<Op> failure = {});
  static Op get(std::string key);
  static Op get_prefix(const std::string& prefix);
  static Op del(std::string key);
  static Op del_prefix(const std::string& prefix);
};

// The answer to one Op, in the order of the branch that ran.
struct OpResult {
  Op::Kind kind = Op::Kind::range;
  int64_t revision = 0;
  std::vector<KeyValue> kvs;  // range
  bool succeeded = false;     // txn: its compares held
  int64_t deleted = 0;        // delete_range
};

struct TxnResult {
  bool succeeded = false;  // every compare held: the success branch ran
  int64_t revision = 0;    // the store's revision after the transaction
  std::vector<OpResult> responses;
};

struct Lease {
  int64_t id = 0;
  int64_t ttl = 0;  // seconds, as granted (etcd may raise a small request)
};

struct WatchEvent {
  enum class Type { put, del };
  Type type = Type::put;
  KeyValue kv;  // for del: key and mod_revision only
  // The key as it was before the event, where the watch asked for it
  // (Watch::Scope::prefix_and_prev; etcd leaves it out once compacted).
  std::optional<KeyValue> prev;
};

// The end of the range holding every key that starts with `prefix`: the
// prefix with its last byte below 0xff incremented and the rest dropped.
// An empty prefix, or one of 0xff bytes only, gives "\0": every key from
// `prefix` on (etcd's convention).
std::string prefix_range_end(const std::string& prefix);

}  // namespace cxxrun::etcd
