// What a TCPStore server knows: keys, queues, waiting and watching clients
// (docs/store-protocol.md §3.3 and §6). Pure: requests in, bytes for clients out, so
// every semantic can be tested without a socket. Clients are opaque ids; the
// server maps them to connections.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "store/request.h"

namespace cxxrun::store {

class StoreState {
 public:
  using ClientId = uint64_t;

  struct Delivery {
    ClientId client;
    std::string bytes;
  };

  struct Outcome {
    // The requester's reply and whatever the request releases for others
    // (woken waiters, watch pushes), each client's bytes in the order it
    // must read them.
    std::vector<Delivery> deliveries;
    // The requester's connection must be closed; `error` says why in one
    // line. Deliveries for other clients still go out.
    bool close = false;
    std::string error;
  };

  // `table` is the requester's: it decides legacy quirks (GET of a missing
  // key closes the connection, as in torch 1.13).
  Outcome apply(ClientId client, OpTable table, const StoreRequest& request);

  // The connection is gone: forget its wait and its watches.
  void disconnect(ClientId client);

  size_t num_keys() const { return data_.size(); }
  // Clients with a WAIT not yet answered.
  size_t waiting_clients() const { return awaited_.size(); }

 private:
  bool present(const std::string& key) const;
  void wait(ClientId client, const std::vector<std::string>& keys, Outcome& out);
  void drop_wait(ClientId client);
  void wake_all(const std::string& key, Outcome& out);
  void wake_one(const std::string& key, Outcome& out);
  void release(ClientId client, Outcome& out);
  // Stores `value`, then wakes waiters and tells watchers.
  void store(const std::string& key, std::string value, Outcome& out);
  void notify(uint8_t type, const std::string& key, const std::string& old_value,
              const std::string& new_value, Outcome& out);
  void add(ClientId client, const StoreRequest& request, Outcome& out);
  void compare_set(ClientId client, const StoreRequest& request, Outcome& out);

  std::unordered_map<std::string, std::string> data_;
  std::unordered_map<std::string, std::deque<std::string>> queues_;

  // A client has at most one WAIT outstanding: the keys it still misses are
  // registered here (once per occurrence, as torch counts them) and
  // awaited_ counts them down. A new WAIT replaces the previous one, which is
  // then never answered: a 1.13 client re-sends WAIT after its own timeout
  // without cancelling, and a stray STOP_WAITING for the abandoned keys would
  // be read as the answer to its next request.
  std::unordered_map<std::string, std::vector<ClientId>> waiting_;
  std::unordered_map<ClientId, int64_t> awaited_;
  std::unordered_map<ClientId, std::unordered_set<std::string>> waited_keys_;

  // Legacy WATCH_KEY registrations, and the reverse index for disconnect.
  std::unordered_map<std::string, std::vector<ClientId>> watchers_;
  std::unordered_map<ClientId, std::unordered_set<std::string>> watched_keys_;
};

}  // namespace cxxrun::store
