// Nodes of a c10d rendezvous over one FakeStore, for the tests of the
// algorithm (rendezvous/c10d_rendezvous.h) split over several files.
#pragma once

#include <catch2/catch.hpp>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "fake_store.h"
#include "rendezvous/c10d_rendezvous.h"

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


}  // namespace c10d_nodes
