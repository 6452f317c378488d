#include "etcd/types.h"

#include <utility>

namespace cxxrun::etcd {

namespace {

// etcd refuses an empty key, so "every key" is spelled from "\0" on.
std::string prefix_key(const std::string& prefix) { return prefix.empty() ? std::string(1, '\0') : prefix; }

}  // namespace

Compare Compare::value_is(std::string key, Result result, std::string value) {
  return Compare{std::move(key), Target::value, result, std::move(value), 0};
}
Compare Compare::version_is(std::string key, Result result, int64_t version) {
  return Compare{std::move(key), Target::version, result, {}, version};
}
Compare Compare::create_revision_is(std::string key, Result result, int64_t revision) {
  return Compare{std::move(key), Target::create_revision, result, {}, revision};
}
Compare Compare::mod_revision_is(std::string key, Result result, int64_t revision) {
  return Compare{std::move(key), Target::mod_revision, result, {}, revision};
}

Op Op::put(std::string key, std::string value, int64_t lease) {
  return Op{Kind::put, std::move(key), {}, std::move(value), lease};
}
Op Op::txn(std::vector<Compare> compares, std::vector<Op> success, std::vector<Op> failure) {
  Op op;
  op.kind = Kind::txn;
  op.compares = std::move(compares);
  op.success = std::move(success);
  op.failure = std::move(failure);
  return op;
}
Op Op::get(std::string key) { return Op{Kind::range, std::move(key), {}, {}, 0}; }
Op Op::get_prefix(const std::string& prefix) {
  return Op{Kind::range, prefix_key(prefix), prefix_range_end(prefix), {}, 0};
}
Op Op::del(std::string key) { return Op{Kind::delete_range, std::move(key), {}, {}, 0}; }
Op Op::del_prefix(const std::string& prefix) {
  return Op{Kind::delete_range, prefix_key(prefix), prefix_range_end(prefix), {}, 0};
}

std::string prefix_range_end(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    auto last = static_cast<unsigned char>(end.back());
    if (last < 0xff) {
      end.back() = static_cast<char>(last + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

}  // namespace cxxrun::etcd
