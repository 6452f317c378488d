// The MASTER_PORT rule (rendezvous/worker_store.h), case by case.
#include <arpa/inet.h>
#include <ifaddrs.h>

#include <catch2/catch.hpp>

#include "listener.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/worker_store.h"
#include "store/client.h"
#include "net/endpoint.h"

using namespace cxxrun::rendezvous;
using cxxrun::net::pick_free_port;
using cxxrun::net::port_in_use;
using cxxrun::store::StoreClient;

TEST_CASE("worker store: the agent serves it on a port the OS picks when the plan says 0") {
  WorkerStore workers;
  const int port = workers.settle(true, "127.0.0.1", "127.0.0.1", 0);
  REQUIRE(port > 0);
  CHECK(port_in_use("127.0.0.1", port));
  // It is a real store: a worker's client can use it.
  StoreClient::Options o;
  o.port = port;
  o.timeout = std::chrono::seconds(5);
  auto client = StoreClient::connect(o);
  client->set("k", "v");
  CHECK(client->get("k") == "v");
}

TEST_CASE("worker store: a renewed store keeps the port and forgets every key") {
  WorkerStore workers;
  const int port = workers.settle(true, "127.0.0.1", "127.0.0.1", 0);
  StoreClient::Options o;
  o.port = port;
  o.timeout = std::chrono::seconds(5);
  StoreClient::connect(o)->set("k", "v");
  workers.renew();
  CHECK(port_in_use("127.0.0.1", port));
  CHECK_FALSE(StoreClient::connect(o)->check({"k"}));
}

TEST_CASE("worker store: the planned port is kept, for the agent's server and for worker rank 0's") {
  const int free = pick_free_port("127.0.0.1");
  WorkerStore served;
  CHECK(served.settle(true, "127.0.0.1", "127.0.0.1", free) == free);
  WorkerStore by_rank0;
  CHECK(by_rank0.settle(false, "", "127.0.0.1", 29500) == 29500);
}

TEST_CASE("worker store: worker rank 0 gets a port that is free now when the plan says 0") {
  Listener held;
  WorkerStore workers;
  const int port = workers.settle(false, "", "127.0.0.1", 0);
  CHECK(port > 0);
  CHECK(port != held.port);
  CHECK_FALSE(port_in_use("127.0.0.1", port));
}

TEST_CASE("worker store: a taken port is one clear error") {
  Listener held;
  WorkerStore workers;
  // A port that was given: PortTaken, which the agent reports as bad input.
  CHECK_THROWS_AS(workers.settle(true, "127.0.0.1", "127.0.0.1", held.port), PortTaken);
  CHECK_THROWS_WITH(workers.settle(true, "127.0.0.1", "127.0.0.1", held.port),
                    "port " + std::to_string(held.port) + " is already in use on 127.0.0.1");
  CHECK(port_taken_message("--master-port=29500", 29500, "127.0.0.1", true) ==
        "--master-port=29500: port 29500 is already in use on 127.0.0.1; pick another port, or leave the port "
        "out (one node: a free one)");
}

TEST_CASE("worker store: a server listens only where its peers reach it") {
  CHECK(bind_host_for("127.0.0.1") == "127.0.0.1");
  CHECK(bind_host_for("localhost") == "localhost");
  CHECK(bind_host_for("::1") == "::1");
  CHECK(bind_host_for("10.1.2.3") == "10.1.2.3");
  // A name may stand for any interface of this machine.
  CHECK(bind_host_for("node7.cluster").empty());
}

TEST_CASE("worker store: it admits loopback and the job's nodes, no one else") {
  const std::set<std::string> nodes{"10.0.0.1", "10.0.0.2", "fd00::7"};
  CHECK(admits(nodes, "10.0.0.2"));
  CHECK(admits(nodes, "fd00::7"));
  CHECK(admits(nodes, "127.0.0.1"));
  CHECK(admits(nodes, "127.0.1.1"));
  CHECK(admits(nodes, "::1"));
  CHECK_FALSE(admits(nodes, "10.0.0.3"));
  CHECK_FALSE(admits(nodes, "198.51.100.2"));
  CHECK_FALSE(admits({}, "10.0.0.1"));
}

TEST_CASE("worker store: this machine's own addresses are this node") {
  // A one-node job whose MASTER_ADDR is --local-addr: its workers connect
  // from this machine's address, not from loopback.
  ifaddrs* ifs = nullptr;
  REQUIRE(getifaddrs(&ifs) == 0);
  for (ifaddrs* i = ifs; i; i = i->ifa_next)
    if (i->ifa_addr && i->ifa_addr->sa_family == AF_INET) {
      char text[INET_ADDRSTRLEN] = {};
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr, text, sizeof text);
      CHECK(admits({}, text));
    }
  freeifaddrs(ifs);
}

TEST_CASE("worker store: only the job's nodes and loopback may connect") {
  WorkerStore workers;
  // Served on loopback, as a test can reach it; a member list without it.
  const int port = workers.settle(true, "127.0.0.1", "10.9.9.9", 0, {"10.9.9.8"});
  StoreClient::Options o;
  o.port = port;
  o.timeout = std::chrono::seconds(5);
  auto client = StoreClient::connect(o);  // from 127.0.0.1: loopback is admitted
  client->set("k", "v");
  CHECK(client->get("k") == "v");
}
