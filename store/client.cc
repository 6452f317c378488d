// StoreClient over one TCP connection; client.h has the promises, this file
// how they are kept.
#include <atomic>
#include <optional>
#include <string_view>
#include <utility>

#include "net/backoff.h"
#include "store/client.h"
#include "store/connection.h"
#include "net/endpoint.h"
#include "store/wire.h"

namespace cxxrun::store {
namespace {

using io::Clock;
using io::Deadline;
using Duration = StoreClient::Duration;

// A server that drops us again right after each reconnect is refusing the
// request itself (e.g. torch's libuv server closes on an oversized one);
// waiting out the whole deadline would only hide that.
constexpr int kMaxBrokenConnections = 3;
// After a timed-out WAIT the server owes us WAIT_CANCELED; this bounds how
// long we wait for it beyond the caller's deadline before dropping the
// connection instead.
constexpr auto kCancelGrace = std::chrono::seconds(2);

// Whether a request that may have reached the server can be sent again on a
// new connection. Reads, SET/MULTI_SET (same value again) and COMPARE_SET
// (a repeat of one that worked compares against our own value and returns
// it: same answer) are; ADD and APPEND would apply twice, and a repeated
// DELETE would report "not found" for a key it did delete.
enum class Resend { safe, unsafe };

// The ops torch 1.13 knows, under its numbers.
constexpr std::pair<wire::Op, wire::LegacyOp> kLegacyOps[] = {
    {wire::Op::set, wire::LegacyOp::set},
    {wire::Op::compare_set, wire::LegacyOp::compare_set},
    {wire::Op::get, wire::LegacyOp::get},
    {wire::Op::add, wire::LegacyOp::add},
    {wire::Op::check, wire::LegacyOp::check},
    {wire::Op::wait, wire::LegacyOp::wait},
    {wire::Op::get_num_keys, wire::LegacyOp::get_num_keys},
    {wire::Op::delete_key, wire::LegacyOp::delete_key},
};

// What get_if_set's COMPARE_SET expects and desires: a value no one stores.
const std::string kNeverStored("\0cxxrun:absent\0", 15);

std::string joined(const std::vector<std::string>& keys) {
  std::string out;
  for (const auto& k : keys) out += (out.empty() ? "" : ", ") + k;
  return out;
}

class TcpStoreClient final : public StoreClient {
 public:
  explicit TcpStoreClient(Options options)
      : options_(std::move(options)), endpoint_(net::format_endpoint({options_.host, options_.port})) {}

  void set_timeout(Duration timeout) override { options_.timeout = timeout; }
  void cancel() override { cancelled_ = true; }
  bool given_up() const { return cancelled_ || (options_.abandoned && *options_.abandoned); }

  void connect_now() {
    net::Backoff backoff;
    connection("connect", options_.timeout, Clock::now() + options_.timeout, backoff);
  }

 private:
  std::string where(std::string_view op) const {
    return "store " + endpoint_ + ": " + std::string(op) + ": ";
  }

  uint8_t opcode(std::string_view name, wire::Op op) const {
    if (options_.protocol == Protocol::modern) return static_cast<uint8_t>(op);
    for (auto [modern, legacy] : kLegacyOps)
      if (modern == op) return static_cast<uint8_t>(legacy);
    throw StoreError(where(name) + "not part of the legacy (torch <= 2.0) protocol");
  }

  // Limits of torch's libuv server, which closes the connection on a
  // violation; failing here names the cause instead of a lost connection.
  std::string checked_key(std::string_view op, const std::string& key) const {
    std::string wire_key = options_.key_prefix + key;
    if (wire_key.size() > wire::kMaxKeyBytes)
      throw StoreError(where(op) + "key of " + std::to_string(wire_key.size()) +
                       " bytes exceeds the " + std::to_string(wire::kMaxKeyBytes) + "-byte limit");
    return wire_key;
  }
  std::vector<std::string> checked_keys(std::string_view op,
                                        const std::vector<std::string>& keys) const {
    if (keys.size() > wire::kMaxKeysPerOp)
      throw StoreError(where(op) + std::to_string(keys.size()) + " keys exceed the limit of " +
                       std::to_string(wire::kMaxKeysPerOp) + " per request");
    std::vector<std::string> out;
    out.reserve(keys.size());
    for (const auto& k : keys) out.push_back(checked_key(op, k));
    return out;
  }
  void check_value(std::string_view op, const std::string& value) const {
    if (value.size() > wire::kMaxValueBytes)
      throw StoreError(where(op) + "value of " + std::to_string(value.size()) +
                       " bytes exceeds the " + std::to_string(wire::kMaxValueBytes) +
                       "-byte limit");
  }
  static Request with_keys(Request request, const std::vector<std::string>& wire_keys) {
    request.u64(wire_keys.size());
    for (const auto& k : wire_keys) request.str(k);
    return request;
  }

  StoreConnection& connection(std::string_view op, Duration timeout, Deadline deadline,
                              net::Backoff& backoff) {
    if (conn_ && conn_->stale()) conn_.reset();
    auto give_up = [&](const std::exception& e) {
      return StoreTimeout(where(op) + "cannot connect within " + std::to_string(timeout.count()) +
                          " ms: " + e.what());
    };
    int broken_handshakes = 0;
    while (!conn_) {
      if (given_up()) throw StoreError(where(op) + "given up: this client was cancelled (its owner is leaving)");
      try {
        conn_.emplace(StoreConnection::open(options_.host, options_.port, options_.protocol, deadline,
                                            options_.token));
        local_address_ = conn_->local_address();
      } catch (const StoreAuthError& e) {
        // A refused token stays refused: no retry.
        throw StoreAuthError(where(op) + e.what());
      } catch (const StoreProtocolError& e) {
        throw StoreError(where(op) + "handshake failed: " + e.what());
      } catch (const io::SocketTimeout& e) {
        throw give_up(e);
      } catch (const StoreHandshakeBroken& e) {
        // A server restarting may drop one handshake; one that keeps doing
        // so does not speak this protocol.
        if (++broken_handshakes >= kMaxBrokenConnections) {
          std::string what = where(op) + e.what() + " (" + std::to_string(broken_handshakes) +
                             " connections in a row)";
          if (dynamic_cast<const StoreAuthBroken*>(&e) != nullptr) throw StoreAuthError(what);
          throw StoreRefused(what);
        }
        if (!backoff.sleep_until_next(deadline)) throw give_up(e);
      } catch (const io::SocketError& e) {
        // Refused included: the server may not be up yet.
        if (!backoff.sleep_until_next(deadline)) throw give_up(e);
      }
    }
    return *conn_;
  }

  // Runs body(connection, deadline, sent) until it returns, reconnecting
  // after a broken connection when the request is safe to send again.
  template <class Body>
  auto call(std::string_view op, Duration timeout, Resend resend, Body&& body) {
    Deadline deadline = Clock::now() + timeout;
    net::Backoff backoff;
    for (int broken = 1;; ++broken) {
      StoreConnection& conn = connection(op, timeout, deadline, backoff);
      size_t sent = 0;
      try {
        return body(conn, deadline, sent);
      } catch (const io::SocketTimeout& e) {
        // A reply cut off mid-way leaves the stream out of step.
        conn_.reset();
        throw StoreTimeout(where(op) + "no reply within " + std::to_string(timeout.count()) +
                           " ms (" + e.what() + ")");
      } catch (const StoreProtocolError& e) {
        conn_.reset();
        throw StoreError(where(op) + e.what());
      } catch (const io::SocketError& e) {
        conn_.reset();
        if (resend == Resend::unsafe && sent > 0)
          throw StoreError(where(op) + e.what() +
                           "; not sent again since the server may have applied it");
        if (broken >= kMaxBrokenConnections)
          throw StoreError(where(op) + e.what() + " (" + std::to_string(broken) +
                           " connections in a row)");
        if (!backoff.sleep_until_next(deadline))
          throw StoreTimeout(where(op) + e.what() + ", and no time left to reconnect");
      }
    }
  }

  // WAIT for every key, or throw StoreTimeout at the deadline leaving the
  // client usable: modern servers cancel the wait, a legacy one cannot, so
  // that connection is dropped (its late STOP_WAITING would answer our next
  // request) and the next call reconnects.
  void wait_on(StoreConnection& conn, std::string_view op,
               const std::vector<std::string>& wire_keys, Duration timeout, Deadline deadline) {
    conn.send(with_keys(Request(opcode(op, wire::Op::wait)), wire_keys), deadline);
    if (!conn.wait_readable(deadline)) {
      if (options_.protocol == Protocol::modern) {
        cancel_wait(conn);
      } else {
        conn_.reset();
      }
      throw StoreTimeout(where(op) + "wait timeout after " + std::to_string(timeout.count()) +
                         " ms, keys: " + joined(wire_keys));
    }
    auto answer = conn.read_u8(deadline);
    if (answer != static_cast<uint8_t>(wire::WaitResponse::stop_waiting))
      throw StoreProtocolError("WAIT answered " + std::to_string(answer));
  }

  void cancel_wait(StoreConnection& conn) {
    Deadline grace = Clock::now() + kCancelGrace;
    try {
      conn.send(Request(static_cast<uint8_t>(wire::Op::cancel_wait)), grace);
      // The keys may have arrived just as we gave up: STOP_WAITING first.
      for (;;) {
        auto answer = conn.read_u8(grace);
        if (answer == static_cast<uint8_t>(wire::WaitResponse::wait_canceled)) return;
        if (answer != static_cast<uint8_t>(wire::WaitResponse::stop_waiting)) break;
      }
    } catch (const io::SocketError&) {
    }
    conn_.reset();
  }

 public:
  void set(const std::string& key, const std::string& value) override {
    auto wire_key = checked_key("set", key);
    check_value("set", value);
    call("set", options_.timeout, Resend::safe,
         [&](StoreConnection& conn, Deadline deadline, size_t&) {
           conn.send(Request(opcode("set", wire::Op::set)).str(wire_key).str(value), deadline);
         });
  }

  std::string get(const std::string& key) override { return get(key, options_.timeout); }

  // One request where CHECK, then a GET (itself a WAIT and a GET), made
  // three: a COMPARE_SET expecting and desiring a value no one stores
  // answers the key's value if it has one, and that value if it has none
  // (torch's quirk, every server's: store/state.cc, torch 1.13's and 2.x's),
  // and writes nothing either way.
  std::optional<std::string> get_if_set(const std::string& key) override {
    std::string value = compare_set(key, kNeverStored, kNeverStored);
    if (value == kNeverStored) return std::nullopt;
    return value;
  }

  std::vector<std::optional<std::string>> get_if_set_each(const std::vector<std::string>& keys) override {
    std::vector<CompareSet> reads;
    reads.reserve(keys.size());
    for (const std::string& key : keys) reads.push_back({key, kNeverStored, kNeverStored});
    std::vector<std::optional<std::string>> out;
    out.reserve(keys.size());
    for (std::string& value : compare_sets(reads))
      out.push_back(value == kNeverStored ? std::nullopt : std::optional<std::string>(std::move(value)));
    return out;
  }

  CountAndValues add_and_get_if_set_each(const std::string& counter, int64_t delta,
                                         const std::vector<std::string>& keys) override {
    Request batch(opcode("add", wire::Op::add));
    batch.str(checked_key("add", counter)).i64(delta);
    const uint8_t cas = opcode("compare_set", wire::Op::compare_set);
    for (const std::string& key : keys) batch.then(cas).str(checked_key("compare_set", key)).str(kNeverStored).str(kNeverStored);
    // An ADD of 0 changes nothing, so the batch may go again; any other would count twice.
    return call("add", options_.timeout, delta == 0 ? Resend::safe : Resend::unsafe,
                [&](StoreConnection& conn, Deadline deadline, size_t& sent) {
                  conn.send(batch, deadline, &sent);
                  CountAndValues out;
                  out.count = conn.read_i64(deadline);
                  for (size_t i = 0; i < keys.size(); ++i) {
                    std::string value = conn.read_bytes(deadline);
                    out.values.push_back(value == kNeverStored ? std::nullopt
                                                               : std::optional<std::string>(std::move(value)));
                  }
                  return out;
                });
  }

  // One write, then every answer in order. Safe to send again whole on a
  // new connection, as a single COMPARE_SET is: a repeat of one that worked
  // compares against its own value and answers it.
  std::vector<std::string> compare_sets(const std::vector<CompareSet>& each) override {
    if (each.empty()) return {};
    const uint8_t op = opcode("compare_set", wire::Op::compare_set);
    std::optional<Request> batch;
    for (const CompareSet& c : each) {
      auto wire_key = checked_key("compare_set", c.key);
      check_value("compare_set", c.expected);
      check_value("compare_set", c.desired);
      if (batch)
        batch->then(op);
      else
        batch.emplace(op);
      batch->str(wire_key).str(c.expected).str(c.desired);
    }
    return call("compare_set", options_.timeout, Resend::safe,
                [&](StoreConnection& conn, Deadline deadline, size_t&) {
                  conn.send(*batch, deadline);
                  std::vector<std::string> answers;
                  answers.reserve(each.size());
                  for (size_t i = 0; i < each.size(); ++i) answers.push_back(conn.read_bytes(deadline));
                  return answers;
                });
  }

  std::string get(const std::string& key, Duration timeout) override {
    std::vector<std::string> wire_keys{checked_key("get", key)};
    return call("get", timeout, Resend::safe,
                [&](StoreConnection& conn, Deadline deadline, size_t&) {
                  // GET only after STOP_WAITING, never pipelined behind the WAIT: a 1.13
                  // server would answer the GET of a still-missing key by closing the
                  // connection, and a cancelled WAIT must not leave a GET queued.
                  wait_on(conn, "get", wire_keys, timeout, deadline);
                  conn.send(Request(opcode("get", wire::Op::get)).str(wire_keys[0]), deadline);
                  return conn.read_bytes(deadline);
                });
  }

  int64_t add(const std::string& key, int64_t delta) override {
    auto wire_key = checked_key("add", key);
    return call("add", options_.timeout, Resend::unsafe,
                [&](StoreConnection& conn, Deadline deadline, size_t& sent) {
                  conn.send(Request(opcode("add", wire::Op::add)).str(wire_key).i64(delta),
                            deadline, &sent);
                  return conn.read_i64(deadline);
                });
  }

  // One write, both answers read in order; sent again never, as an ADD.
  int64_t add_and_compare_set(const std::string& counter, const CompareSet& also) override {
    check_value("compare_set", also.expected);
    check_value("compare_set", also.desired);
    Request batch(opcode("add", wire::Op::add));
    batch.str(checked_key("add", counter)).i64(1);
    batch.then(opcode("compare_set", wire::Op::compare_set))
        .str(checked_key("compare_set", also.key))
        .str(also.expected)
        .str(also.desired);
    return call("add", options_.timeout, Resend::unsafe, [&](StoreConnection& conn, Deadline deadline, size_t& sent) {
      conn.send(batch, deadline, &sent);
      const int64_t count = conn.read_i64(deadline);
      conn.read_bytes(deadline);
      return count;
    });
  }

  std::string compare_set(const std::string& key, const std::string& expected,
                          const std::string& desired) override {
    auto wire_key = checked_key("compare_set", key);
    check_value("compare_set", expected);
    check_value("compare_set", desired);
    return call("compare_set", options_.timeout, Resend::safe,
                [&](StoreConnection& conn, Deadline deadline, size_t&) {
                  conn.send(Request(opcode("compare_set", wire::Op::compare_set))
                                .str(wire_key)
                                .str(expected)
                                .str(desired),
                            deadline);
                  return conn.read_bytes(deadline);
                });
  }

  bool check(const std::vector<std::string>& keys) override {
    auto wire_keys = checked_keys("check", keys);
    return call("check", options_.timeout, Resend::safe,
                [&](StoreConnection& conn, Deadline deadline, size_t&) {
                  conn.send(with_keys(Request(opcode("check", wire::Op::check)), wire_keys),
                            deadline);
                  auto answer = conn.read_u8(deadline);
                  if (answer == static_cast<uint8_t>(wire::CheckResponse::ready)) return true;
                  if (answer == static_cast<uint8_t>(wire::CheckResponse::not_ready)) return false;
                  throw StoreProtocolError("CHECK answered " + std::to_string(answer));
                });
  }

  void wait(const std::vector<std::string>& keys, Duration timeout) override {
    auto wire_keys = checked_keys("wait", keys);
    call("wait", timeout, Resend::safe, [&](StoreConnection& conn, Deadline deadline, size_t&) {
      wait_on(conn, "wait", wire_keys, timeout, deadline);
    });
  }

  int64_t num_keys() override {
    return call("num_keys", options_.timeout, Resend::safe,
                [&](StoreConnection& conn, Deadline deadline, size_t&) {
                  conn.send(Request(opcode("num_keys", wire::Op::get_num_keys)), deadline);
                  return conn.read_i64(deadline);
                });
  }

  bool delete_key(const std::string& key) override {
    auto wire_key = checked_key("delete_key", key);
    return call("delete_key", options_.timeout, Resend::unsafe,
                [&](StoreConnection& conn, Deadline deadline, size_t& sent) {
                  conn.send(Request(opcode("delete_key", wire::Op::delete_key)).str(wire_key),
                            deadline, &sent);
                  return conn.read_i64(deadline) > 0;
                });
  }

  void append(const std::string& key, const std::string& value) override {
    auto wire_key = checked_key("append", key);
    check_value("append", value);
    auto op = opcode("append", wire::Op::append);
    call("append", options_.timeout, Resend::unsafe,
         [&](StoreConnection& conn, Deadline deadline, size_t& sent) {
           conn.send(Request(op).str(wire_key).str(value), deadline, &sent);
         });
  }

  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override {
    auto op = opcode("multi_get", wire::Op::multi_get);
    auto wire_keys = checked_keys("multi_get", keys);
    return call("multi_get", options_.timeout, Resend::safe,
                [&](StoreConnection& conn, Deadline deadline, size_t&) {
                  wait_on(conn, "multi_get", wire_keys, options_.timeout, deadline);
                  conn.send(with_keys(Request(op), wire_keys), deadline);
                  std::vector<std::string> values;
                  values.reserve(wire_keys.size());
                  for (size_t i = 0; i < wire_keys.size(); ++i)
                    values.push_back(conn.read_bytes(deadline));
                  return values;
                });
  }

  void multi_set(const std::vector<std::string>& keys,
                 const std::vector<std::string>& values) override {
    auto op = opcode("multi_set", wire::Op::multi_set);
    if (keys.size() != values.size())
      throw StoreError(where("multi_set") + std::to_string(keys.size()) + " keys but " +
                       std::to_string(values.size()) + " values");
    auto wire_keys = checked_keys("multi_set", keys);
    Request request(op);
    request.u64(wire_keys.size());
    for (size_t i = 0; i < wire_keys.size(); ++i) {
      check_value("multi_set", values[i]);
      request.str(wire_keys[i]).str(values[i]);
    }
    call("multi_set", options_.timeout, Resend::safe,
         [&](StoreConnection& conn, Deadline deadline, size_t&) { conn.send(request, deadline); });
  }

  std::string local_address() const override { return local_address_; }

 private:
  Options options_;
  std::string endpoint_;
  std::optional<StoreConnection> conn_;
  std::atomic<bool> cancelled_{false};
  std::string local_address_;
};

}  // namespace

std::unique_ptr<StoreClient> StoreClient::connect(const Options& options) {
  auto client = std::make_unique<TcpStoreClient>(options);
  client->connect_now();
  return client;
}

}  // namespace cxxrun::store
