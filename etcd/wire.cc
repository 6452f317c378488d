#include "etcd/wire.h"

#include <algorithm>

namespace cxxrun::etcd::wire {
namespace {

using protobuf::Field;
using protobuf::Reader;
using protobuf::Writer;

// Field numbers, from etcd's api/etcdserverpb/rpc.proto and
// api/mvccpb/kv.proto; a namespace per message.
namespace header_f { constexpr uint32_t member_id = 2, revision = 3, raft_term = 4; }
namespace kv_f { constexpr uint32_t key = 1, create_revision = 2, mod_revision = 3, version = 4, value = 5, lease = 6; }
namespace range_f {  // RangeRequest, RangeResponse
constexpr uint32_t key = 1, range_end = 2, limit = 3, revision = 4, keys_only = 8, count_only = 9;
constexpr uint32_t header = 1, kvs = 2, more = 3, count = 4;
}  // namespace range_f
namespace put_f { constexpr uint32_t key = 1, value = 2, lease = 3; }
namespace delete_f { constexpr uint32_t key = 1, range_end = 2, deleted = 2; }  // the last: DeleteRangeResponse
namespace compare_f {
constexpr uint32_t result = 1, target = 2, key = 3, version = 4, create_revision = 5, mod_revision = 6, value = 7;
}
namespace op_f { constexpr uint32_t range = 1, put = 2, delete_range = 3, txn = 4; }  // RequestOp, ResponseOp
namespace txn_f {  // TxnRequest, TxnResponse
constexpr uint32_t compare = 1, success = 2, failure = 3;
constexpr uint32_t succeeded = 2, responses = 3;
}  // namespace txn_f
namespace lease_f {
constexpr uint32_t request_ttl = 1, request_id = 1;  // LeaseGrantRequest.TTL; keep-alive's and revoke's ID
constexpr uint32_t id = 2, ttl = 3, error = 4;      // LeaseGrantResponse, LeaseKeepAliveResponse
}  // namespace lease_f
namespace auth_f { constexpr uint32_t name = 1, password = 2, token = 2; }
namespace status_f { constexpr uint32_t leader = 4; }
namespace watch_f {
constexpr uint32_t create_request = 1;                                                 // WatchRequest
constexpr uint32_t key = 1, range_end = 2, start_revision = 3, progress_notify = 4, prev_kv = 6;  // WatchCreateRequest
constexpr uint32_t created = 3, canceled = 4, compact_revision = 5, cancel_reason = 6, events = 11;  // WatchResponse
constexpr uint32_t event_type = 1, event_kv = 2, event_prev_kv = 3;                    // mvccpb.Event
}  // namespace watch_f
constexpr uint32_t kHeader = 1;  // every response's ResponseHeader

// ---- requests ---------------------------------------------------------------

// A key and, for a range, its end: fields 1 and 2 of every keyed request.
Writer keyed(const std::string& key, const std::string& range_end) {
  Writer w;
  w.bytes(range_f::key, key).bytes(range_f::range_end, range_end);
  return w;
}

std::string txn_bytes(const std::vector<Compare>& compares, const std::vector<Op>& success,
                      const std::vector<Op>& failure);

std::string op_bytes(const Op& op) {
  Writer w;
  switch (op.kind) {
    case Op::Kind::range:
      return w.message(op_f::range, keyed(op.key, op.range_end).data()).take();
    case Op::Kind::put:
      return w.message(op_f::put, put_request(op.key, op.value, op.lease)).take();
    case Op::Kind::delete_range:
      return w.message(op_f::delete_range, keyed(op.key, op.range_end).data()).take();
    case Op::Kind::txn:
      return w.message(op_f::txn, txn_bytes(op.compares, op.success, op.failure)).take();
  }
  return {};
}

std::string compare_bytes(const Compare& c) {
  // etcd's enums: CompareResult EQUAL 0, GREATER 1, LESS 2, NOT_EQUAL 3;
  // CompareTarget VERSION 0, CREATE 1, MOD 2, VALUE 3.
  static constexpr uint64_t kResults[] = {0, 3, 1, 2};  // equal, not_equal, greater, less
  static constexpr uint64_t kTargets[] = {3, 0, 1, 2};  // value, version, create_revision, mod_revision
  Writer w;
  w.varint(compare_f::result, kResults[static_cast<size_t>(c.result)])
      .varint(compare_f::target, kTargets[static_cast<size_t>(c.target)])
      .bytes(compare_f::key, c.key);
  // The target_union oneof: written even at 0 or empty.
  switch (c.target) {
    case Compare::Target::version: w.varint_always(compare_f::version, static_cast<uint64_t>(c.number)); break;
    case Compare::Target::create_revision:
      w.varint_always(compare_f::create_revision, static_cast<uint64_t>(c.number));
      break;
    case Compare::Target::mod_revision:
      w.varint_always(compare_f::mod_revision, static_cast<uint64_t>(c.number));
      break;
    case Compare::Target::value: w.bytes_always(compare_f::value, c.value); break;
  }
  return w.take();
}

std::string txn_bytes(const std::vector<Compare>& compares, const std::vector<Op>& success,
                      const std::vector<Op>& failure) {
  Writer w;
  for (const auto& c : compares) w.message(txn_f::compare, compare_bytes(c));
  for (const auto& op : success) w.message(txn_f::success, op_bytes(op));
  for (const auto& op : failure) w.message(txn_f::failure, op_bytes(op));
  return w.take();
}

// ---- responses --------------------------------------------------------------

struct Header {
  uint64_t member_id = 0;
  int64_t revision = 0;
  uint64_t raft_term = 0;
};

Header header_of(std::string_view message) {
  Header out;
  Reader r(message);
  while (auto f = r.next()) {
    if (f->number == header_f::member_id) out.member_id = f->as_uint64();
    else if (f->number == header_f::revision) out.revision = f->as_int64();
    else if (f->number == header_f::raft_term) out.raft_term = f->as_uint64();
  }
  return out;
}

// Visits every field of a response but its header, which is parsed (one
// that does not parse makes the answer malformed); returns the header's
// revision.
template <class Visit>
int64_t fields(std::string_view response, Visit visit) {
  int64_t revision = 0;
  Reader r(response);
  while (auto f = r.next()) {
    if (f->number == kHeader) revision = header_of(f->as_bytes()).revision;
    else visit(*f);
  }
  return revision;
}

int64_t header_revision(std::string_view response) {
  return fields(response, [](const Field&) {});
}

KeyValue key_value(std::string_view message) {
  KeyValue out;
  Reader r(message);
  while (auto f = r.next()) {
    switch (f->number) {
      case kv_f::key: out.key = f->as_bytes(); break;
      case kv_f::create_revision: out.create_revision = f->as_int64(); break;
      case kv_f::mod_revision: out.mod_revision = f->as_int64(); break;
      case kv_f::version: out.version = f->as_int64(); break;
      case kv_f::value: out.value = f->as_bytes(); break;
      case kv_f::lease: out.lease = f->as_int64(); break;
      default: break;
    }
  }
  return out;
}

struct Range {
  int64_t revision = 0;
  std::vector<KeyValue> kvs;
  bool more = false;
  int64_t count = 0;
};

Range range_of(std::string_view message) {
  Range out;
  out.revision = fields(message, [&](const Field& f) {
    switch (f.number) {
      case range_f::kvs: out.kvs.push_back(key_value(f.as_bytes())); break;
      case range_f::more: out.more = f.as_bool(); break;
      case range_f::count: out.count = f.as_int64(); break;
      default: break;
    }
  });
  return out;
}

// The int64 field `number` of a response (0 when absent); the revision
// into `revision`.
int64_t int64_field(std::string_view response, uint32_t number, int64_t* revision = nullptr) {
  int64_t out = 0;
  const int64_t rev = fields(response, [&](const Field& f) {
    if (f.number == number) out = f.as_int64();
  });
  if (revision) *revision = rev;
  return out;
}

OpResult op_result(std::string_view message) {
  OpResult op;
  bool known = false;
  Reader r(message);
  while (auto f = r.next()) {
    switch (f->number) {
      case op_f::range: {
        auto range = range_of(f->as_bytes());
        op.kind = Op::Kind::range;
        op.revision = range.revision;
        op.kvs = std::move(range.kvs);
        break;
      }
      case op_f::put:
        op.kind = Op::Kind::put;
        op.revision = header_revision(f->as_bytes());
        break;
      case op_f::delete_range:
        op.kind = Op::Kind::delete_range;
        op.deleted = int64_field(f->as_bytes(), delete_f::deleted, &op.revision);
        break;
      case op_f::txn:
        op.kind = Op::Kind::txn;
        op.succeeded = int64_field(f->as_bytes(), txn_f::succeeded, &op.revision) != 0;
        break;
      default:
        continue;
    }
    known = true;
  }
  if (!known) throw Malformed("malformed answer: a txn response of no kind this client knows");
  return op;
}

// The header of a response, by its top-level fields up to field 1 only; no
// throw (see parse_member_id).
Header cheap_header(std::string_view body) {
  try {
    Reader r(body);
    while (auto f = r.next())
      if (f->number == kHeader) return header_of(f->as_bytes());
  } catch (const Malformed&) {
  }
  return {};
}

}  // namespace

std::string range_request(const std::string& key, const std::string& range_end) {
  return keyed(key, range_end).take();
}

std::string range_request(const std::string& key, const std::string& range_end, RangeShape shape) {
  return keyed(key, range_end)
      .boolean(shape == RangeShape::count_only ? range_f::count_only : range_f::keys_only, true)
      .take();
}

std::string range_at_request(const std::string& key, int64_t revision) {
  return keyed(key, "").int64(range_f::revision, revision).take();
}

std::string range_page_request(const std::string& key, const std::string& range_end, int64_t limit, int64_t revision) {
  return keyed(key, range_end).int64(range_f::limit, limit).int64(range_f::revision, revision).take();
}

std::string put_request(const std::string& key, const std::string& value, int64_t lease) {
  Writer w;
  return w.bytes(put_f::key, key).bytes(put_f::value, value).int64(put_f::lease, lease).take();
}

std::string delete_request(const std::string& key, const std::string& range_end) {
  return keyed(key, range_end).take();
}

std::string txn_request(const std::vector<Compare>& compares, const std::vector<Op>& success,
                        const std::vector<Op>& failure) {
  return txn_bytes(compares, success, failure);
}

std::string lease_grant_request(int64_t ttl_seconds) {
  return Writer().int64(lease_f::request_ttl, ttl_seconds).take();
}

std::string lease_id_request(int64_t id) { return Writer().int64(lease_f::request_id, id).take(); }

std::string authenticate_request(const std::string& name, const std::string& password) {
  return Writer().bytes(auth_f::name, name).bytes(auth_f::password, password).take();
}

std::string watch_create_request(const std::string& key, const std::string& range_end, int64_t start_revision,
                                 bool prev_kv) {
  Writer create;
  create.bytes(watch_f::key, key).bytes(watch_f::range_end, range_end);
  if (start_revision > 0) create.int64(watch_f::start_revision, start_revision);
  // A quiet watch still learns the current revision (every 10 minutes by
  // etcd's default), so resuming it after a member fails starts near now,
  // not where it was created, which compaction may have dropped.
  create.boolean(watch_f::progress_notify, true);
  create.boolean(watch_f::prev_kv, prev_kv);
  return Writer().message(watch_f::create_request, create.data()).take();
}

GetResult parse_get(std::string_view body) {
  auto range = range_of(body);
  GetResult out;
  out.revision = range.revision;
  if (!range.kvs.empty()) out.kv = std::move(range.kvs.front());
  return out;
}

RangeResult parse_range(std::string_view body) {
  auto range = range_of(body);
  return RangeResult{range.revision, std::move(range.kvs), range.more};
}

CountResult parse_count(std::string_view body) {
  auto range = range_of(body);
  return CountResult{range.revision, range.count};
}

int64_t parse_revision(std::string_view body) { return header_revision(body); }

int64_t parse_deleted(std::string_view body) { return int64_field(body, delete_f::deleted); }

TxnResult parse_txn(std::string_view body) {
  TxnResult out;
  out.revision = fields(body, [&](const Field& f) {
    if (f.number == txn_f::succeeded) out.succeeded = f.as_bool();
    else if (f.number == txn_f::responses) out.responses.push_back(op_result(f.as_bytes()));
  });
  return out;
}

Lease parse_lease_grant(std::string_view body) {
  Lease out;
  std::string error;
  fields(body, [&](const Field& f) {
    if (f.number == lease_f::id) out.id = f.as_int64();
    else if (f.number == lease_f::ttl) out.ttl = f.as_int64();
    else if (f.number == lease_f::error) error = f.as_bytes();
  });
  if (!error.empty()) throw Malformed("lease grant refused: " + error);
  return out;
}

int64_t parse_keep_alive(std::string_view body) { return std::max<int64_t>(0, int64_field(body, lease_f::ttl)); }

std::string parse_token(std::string_view body) {
  std::string token;
  fields(body, [&](const Field& f) {
    if (f.number == auth_f::token) token = f.as_bytes();
  });
  if (token.empty()) throw Malformed("malformed answer: authenticate gave no token");
  return token;
}

std::string parse_member_id(std::string_view body) {
  const auto id = cheap_header(body).member_id;
  return id == 0 ? std::string() : std::to_string(id);
}

int64_t parse_raft_term(std::string_view body) { return static_cast<int64_t>(cheap_header(body).raft_term); }

std::string parse_status_leader(std::string_view body) {
  uint64_t leader = 0;
  fields(body, [&](const Field& f) {
    if (f.number == status_f::leader) leader = f.as_uint64();
  });
  return leader == 0 ? std::string() : std::to_string(leader);
}

WatchMessage parse_watch_message(std::string_view message) {
  WatchMessage out;
  bool created = false, canceled = false;
  out.revision = fields(message, [&](const Field& f) {
    switch (f.number) {
      case watch_f::created: created = f.as_bool(); break;
      case watch_f::canceled: canceled = f.as_bool(); break;
      case watch_f::compact_revision: out.compact_revision = f.as_int64(); break;
      case watch_f::cancel_reason: out.cancel_reason = f.as_bytes(); break;
      case watch_f::events: {
        WatchEvent event;
        Reader e(f.as_bytes());
        while (auto g = e.next()) {
          if (g->number == watch_f::event_type) {
            const auto type = g->as_uint64();  // mvccpb.Event.EventType: PUT 0, DELETE 1
            if (type > 1) throw Malformed("malformed answer: a watch event of type " + std::to_string(type));
            event.type = type == 1 ? WatchEvent::Type::del : WatchEvent::Type::put;
          } else if (g->number == watch_f::event_kv) {
            event.kv = key_value(g->as_bytes());
          } else if (g->number == watch_f::event_prev_kv) {
            event.prev = key_value(g->as_bytes());
          }
        }
        out.events.push_back(std::move(event));
        break;
      }
      default: break;
    }
  });
  if (canceled) out.kind = WatchMessage::Kind::canceled;
  else if (created) out.kind = WatchMessage::Kind::created;
  else if (!out.events.empty()) out.kind = WatchMessage::Kind::events;
  return out;
}

}  // namespace cxxrun::etcd::wire
