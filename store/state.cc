#include "store/state.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstring>
#include <optional>

#include <fmt/format.h>

#include "store/wire.h"

namespace cxxrun::store {
namespace {

template <typename T>
void put(std::string& out, T value) {
  char raw[sizeof(T)];
  std::memcpy(raw, &value, sizeof(T));
  out.append(raw, sizeof(T));
}

void put_bytes(std::string& out, std::string_view bytes) {
  put<uint64_t>(out, bytes.size());
  out.append(bytes);
}

std::string u8(uint8_t value) { return std::string(1, static_cast<char>(value)); }

template <typename T>
std::string scalar(T value) {
  std::string out;
  put(out, value);
  return out;
}

std::string bytes(std::string_view value) {
  std::string out;
  out.reserve(sizeof(uint64_t) + value.size());
  put_bytes(out, value);
  return out;
}

// What torch's std::stoll accepts: leading whitespace, a sign, digits, and
// anything after them ignored. Nothing else is a counter.
std::optional<int64_t> parse_counter(std::string_view text) {
  size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
  if (i < text.size() && text[i] == '+') {
    ++i;
    if (i < text.size() && text[i] == '-') return std::nullopt;
  }
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data() + i, text.data() + text.size(), value);
  if (ec != std::errc()) return std::nullopt;
  return value;
}

std::string printable(const std::string& key) {
  std::string out;
  for (char c : key.substr(0, 64))
    out += std::isprint(static_cast<unsigned char>(c)) ? c : '?';
  return key.size() > 64 ? out + "..." : out;
}

}  // namespace

StoreState::Outcome StoreState::apply(ClientId client, OpTable table, const StoreRequest& r) {
  Outcome out;
  auto reply = [&](std::string bytes) { out.deliveries.push_back({client, std::move(bytes)}); };
  switch (r.command) {
    case StoreCommand::validate:
      break;
    case StoreCommand::ping:
      reply(scalar<uint32_t>(r.nonce));
      break;
    case StoreCommand::set:
      store(r.keys[0], r.values[0], out);
      break;
    case StoreCommand::append: {
      auto it = data_.find(r.keys[0]);
      // In place when nobody watches: an existing key has no waiters, and
      // copying would make a run of appends quadratic.
      if (it != data_.end() && watchers_.count(r.keys[0]) == 0)
        it->second += r.values[0];
      else
        store(r.keys[0], it == data_.end() ? r.values[0] : it->second + r.values[0], out);
      break;
    }
    case StoreCommand::multi_set:
      for (size_t i = 0; i < r.keys.size(); ++i) store(r.keys[i], r.values[i], out);
      break;
    case StoreCommand::compare_set:
      compare_set(client, r, out);
      break;
    case StoreCommand::add:
      add(client, r, out);
      break;
    case StoreCommand::get: {
      auto it = data_.find(r.keys[0]);
      if (it != data_.end()) {
        reply(bytes(it->second));
      } else if (table == OpTable::legacy) {
        // 1.13's server does tcpStore_.at(key): the exception closes the
        // socket, and its clients expect exactly that.
        out.close = true;
        out.error = fmt::format("GET of missing key '{}' on a legacy connection", printable(r.keys[0]));
      } else {
        reply(bytes(""));
      }
      break;
    }
    case StoreCommand::multi_get: {
      size_t total = 0;
      for (const std::string& key : r.keys) {
        auto it = data_.find(key);
        total += sizeof(uint64_t) + (it == data_.end() ? 0 : it->second.size());
      }
      if (total > wire::kMaxRequestBytes) {
        out.close = true;
        out.error = fmt::format("MULTI_GET reply of {} bytes exceeds the {}-byte limit", total,
                                wire::kMaxRequestBytes);
        break;
      }
      std::string all;
      all.reserve(total);
      for (const std::string& key : r.keys) {
        auto it = data_.find(key);
        put_bytes(all, it == data_.end() ? std::string_view() : std::string_view(it->second));
      }
      reply(std::move(all));
      break;
    }
    case StoreCommand::check: {
      bool ready = std::all_of(r.keys.begin(), r.keys.end(), [&](auto& k) { return present(k); });
      reply(u8(static_cast<uint8_t>(ready ? wire::CheckResponse::ready : wire::CheckResponse::not_ready)));
      break;
    }
    case StoreCommand::wait:
      wait(client, r.keys, out);
      break;
    case StoreCommand::cancel_wait:
      // Whether or not STOP_WAITING already went out: the client reads until
      // this byte and skips a racing STOP_WAITING.
      drop_wait(client);
      reply(u8(static_cast<uint8_t>(wire::WaitResponse::wait_canceled)));
      break;
    case StoreCommand::get_num_keys:
      reply(scalar<int64_t>(static_cast<int64_t>(data_.size())));
      break;
    case StoreCommand::delete_key: {
      auto it = data_.find(r.keys[0]);
      if (it == data_.end()) {
        reply(scalar<int64_t>(0));
        break;
      }
      std::string old = std::move(it->second);
      data_.erase(it);
      reply(scalar<int64_t>(1));
      notify(static_cast<uint8_t>(wire::WatchResponse::key_deleted), r.keys[0], old, "", out);
      break;
    }
    case StoreCommand::queue_push:
      queues_[r.keys[0]].push_back(r.values[0]);
      wake_one(r.keys[0], out);
      break;
    case StoreCommand::queue_pop: {
      auto it = queues_.find(r.keys[0]);
      if (it == queues_.end()) {
        reply(scalar<int64_t>(0));
        break;
      }
      std::string popped = scalar<int64_t>(static_cast<int64_t>(it->second.size()));
      put_bytes(popped, it->second.front());
      it->second.pop_front();
      if (it->second.empty()) queues_.erase(it);
      reply(std::move(popped));
      break;
    }
    case StoreCommand::queue_len: {
      auto it = queues_.find(r.keys[0]);
      reply(scalar<int64_t>(it == queues_.end() ? 0 : static_cast<int64_t>(it->second.size())));
      break;
    }
    case StoreCommand::watch_key: {
      auto& watchers = watchers_[r.keys[0]];
      if (std::find(watchers.begin(), watchers.end(), client) == watchers.end()) {
        watchers.push_back(client);
        watched_keys_[client].insert(r.keys[0]);
      }
      reply(u8(static_cast<uint8_t>(wire::WatchResponse::callback_registered)));
      break;
    }
  }
  return out;
}

void StoreState::disconnect(ClientId client) {
  drop_wait(client);
  auto it = watched_keys_.find(client);
  if (it == watched_keys_.end()) return;
  for (const std::string& key : it->second) {
    auto w = watchers_.find(key);
    if (w == watchers_.end()) continue;
    std::erase(w->second, client);
    if (w->second.empty()) watchers_.erase(w);
  }
  watched_keys_.erase(it);
}

bool StoreState::present(const std::string& key) const {
  if (data_.count(key) != 0) return true;
  auto q = queues_.find(key);
  return q != queues_.end() && !q->second.empty();
}

void StoreState::wait(ClientId client, const std::vector<std::string>& keys, Outcome& out) {
  drop_wait(client);
  if (std::all_of(keys.begin(), keys.end(), [&](auto& k) { return present(k); })) {
    out.deliveries.push_back({client, u8(static_cast<uint8_t>(wire::WaitResponse::stop_waiting))});
    return;
  }
  int64_t missing = 0;
  auto& index = waited_keys_[client];
  for (const std::string& key : keys) {
    if (present(key)) continue;
    waiting_[key].push_back(client);
    index.insert(key);
    ++missing;
  }
  awaited_[client] = missing;
}

void StoreState::drop_wait(ClientId client) {
  awaited_.erase(client);
  auto it = waited_keys_.find(client);
  if (it == waited_keys_.end()) return;
  for (const std::string& key : it->second) {
    auto w = waiting_.find(key);
    if (w == waiting_.end()) continue;
    std::erase(w->second, client);
    if (w->second.empty()) waiting_.erase(w);
  }
  waited_keys_.erase(it);
}

void StoreState::release(ClientId client, Outcome& out) {
  auto it = awaited_.find(client);
  if (it == awaited_.end() || --it->second > 0) return;
  awaited_.erase(it);
  waited_keys_.erase(client);
  out.deliveries.push_back({client, u8(static_cast<uint8_t>(wire::WaitResponse::stop_waiting))});
}

void StoreState::wake_all(const std::string& key, Outcome& out) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  std::vector<ClientId> clients = std::move(it->second);
  waiting_.erase(it);
  for (ClientId client : clients) {
    if (auto index = waited_keys_.find(client); index != waited_keys_.end()) index->second.erase(key);
    release(client, out);
  }
}

// A queue item is for one consumer: it satisfies the oldest registration on
// the queue's name, and only that one.
void StoreState::wake_one(const std::string& key, Outcome& out) {
  auto it = waiting_.find(key);
  if (it == waiting_.end()) return;
  ClientId client = it->second.front();
  it->second.erase(it->second.begin());
  bool still_registered =
      std::find(it->second.begin(), it->second.end(), client) != it->second.end();
  if (it->second.empty()) waiting_.erase(it);
  if (!still_registered)
    if (auto index = waited_keys_.find(client); index != waited_keys_.end()) index->second.erase(key);
  release(client, out);
}

void StoreState::store(const std::string& key, std::string value, Outcome& out) {
  auto [it, created] = data_.try_emplace(key);
  bool watched = watchers_.count(key) != 0;
  std::string old = watched ? std::move(it->second) : std::string();
  it->second = std::move(value);
  wake_all(key, out);
  if (watched) {
    auto type = created ? wire::WatchResponse::key_created : wire::WatchResponse::key_updated;
    notify(static_cast<uint8_t>(type), key, old, it->second, out);
  }
}

void StoreState::notify(uint8_t type, const std::string& key, const std::string& old_value,
                        const std::string& new_value, Outcome& out) {
  auto it = watchers_.find(key);
  if (it == watchers_.end()) return;
  std::string push = u8(type);
  put_bytes(push, key);
  put_bytes(push, old_value);
  put_bytes(push, new_value);
  for (ClientId watcher : it->second) out.deliveries.push_back({watcher, push});
}

void StoreState::add(ClientId client, const StoreRequest& r, Outcome& out) {
  const std::string& key = r.keys[0];
  int64_t value = r.delta;
  if (auto it = data_.find(key); it != data_.end()) {
    std::optional<int64_t> current = parse_counter(it->second);
    if (!current || __builtin_add_overflow(*current, r.delta, &value)) {
      out.close = true;
      out.error = fmt::format("ADD {} to key '{}' whose value is not a 64-bit counter", r.delta,
                              printable(key));
      return;
    }
  }
  out.deliveries.push_back({client, scalar<int64_t>(value)});
  store(key, std::to_string(value), out);
}

// torch's quirk, kept because c10d's rendezvous relies on it: an absent key
// with a non-empty `expected` answers `expected` and stores nothing.
void StoreState::compare_set(ClientId client, const StoreRequest& r, Outcome& out) {
  const std::string& key = r.keys[0];
  const std::string& expected = r.values[0];
  const std::string& desired = r.values[1];
  auto it = data_.find(key);
  if (it == data_.end()) {
    out.deliveries.push_back({client, bytes(expected.empty() ? desired : expected)});
    if (expected.empty()) store(key, desired, out);
    return;
  }
  if (it->second == expected) {
    out.deliveries.push_back({client, bytes(desired)});
    store(key, desired, out);
    return;
  }
  out.deliveries.push_back({client, bytes(it->second)});
}

}  // namespace cxxrun::store
