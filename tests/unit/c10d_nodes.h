// Nodes of a c10d rendezvous over one FakeStore, for the tests of the
// algorithm (rendezvous/c10d_rendezvous.h) split over several files.
#pragma once

#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "fake_store.h"
#include "rendezvous/c10d_backend.h"
#include "rendezvous/c10d_rendezvous.h"
#include "rendezvous/state_store.h"

namespace c10d_nodes {

using namespace cxxrun::rendezvous;
using namespace std::chrono_literals;

inline RendezvousSettings settings(int min, int max, int nproc = 2) {
  RendezvousSettings s;
  s.run_id = "job";
  s.endpoint = "fake:0";
  s.min_nodes = min;
  s.max_nodes = max;
  s.local_world_size = nproc;
  s.entrypoint = "train";
  s.join_timeout = 10s;
  s.last_call_timeout = 300ms;
  s.progress_interval = 100ms;
  return s;
}

struct Node {
  FakeStore::Client client;
  C10dRendezvous rdzv;
  Node(FakeStore& store, const std::string& addr, RendezvousSettings s, int port = 1000)
      : client(store, addr), rdzv(client, std::move(s),
             [this, port](const std::vector<std::string>& members) {
               members_seen = members;
               return port;
             },
             [](const std::string&) {}) {}
  std::vector<std::string> members_seen;  // what pick_port was told (group rank 0)
};

inline std::vector<Assignment> join_all(std::vector<std::unique_ptr<Node>>& nodes) {
  std::vector<std::future<Assignment>> futures;
  for (auto& n : nodes) futures.push_back(std::async(std::launch::async, [&n] { return n->rdzv.next_rendezvous(); }));
  std::vector<Assignment> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

// The job's state store as the backend opens it, over the fake.
class FakeStateStore : public StateStore {
 public:
  FakeStateStore(FakeStore& store, std::string addr) : store_(store), addr_(addr), client_(store, std::move(addr)) {}
  cxxrun::store::StoreClient& client() override { return client_; }
  std::unique_ptr<cxxrun::store::StoreClient> connect_another(std::chrono::milliseconds) const override {
    return std::make_unique<FakeStore::Client>(store_, addr_);
  }
  void leave(bool, int, const std::function<void()>& first) override { first(); }

 private:
  FakeStore& store_;
  const std::string addr_;
  FakeStore::Client client_;
};

inline C10dBackend backend(FakeStore& store, const std::string& addr) {
  RendezvousConfig config;
  config.backend = Backend::c10d;
  config.settings = settings(2, 2);
  config.settings.local_addr = "127.0.0.1";
  return C10dBackend(config, WorkerStorePlan{}, [&store, addr](const RendezvousConfig&) {
    return std::make_unique<FakeStateStore>(store, addr);
  });
}

}  // namespace c10d_nodes
