// JobStore with the rendezvous store's shared secret (--rdzv-conf
// token_file): the store it hosts requires the token, every connection it
// opens gives it, and a refused token ends the join at once.
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "raw_socket.h"
#include "rendezvous/job_store.h"
#include "store/client.h"
#include "net/endpoint.h"
#include "store/server.h"
#include "store_wire_bytes.h"

using namespace cxxrun;
using namespace std::chrono_literals;
using store_bytes::LegacyOp;
using store_bytes::Msg;

namespace {

rendezvous::RendezvousConfig c10d_config(int port, bool is_host, const std::string& token) {
  rendezvous::RendezvousConfig c;
  c.backend = rendezvous::Backend::c10d;
  c.host = "127.0.0.1";
  c.port = port;
  c.is_host = is_host;
  c.settings.run_id = "job_store_test";
  c.settings.join_timeout = 30s;
  c.settings.read_timeout = 5s;
  c.settings.token = token;
  return c;
}

}  // namespace

TEST_CASE("job store: the store it hosts requires its token, and its connections give it") {
  const int port = cxxrun::net::pick_free_port("127.0.0.1");
  rendezvous::JobStore job(c10d_config(port, true, "t0ken"));
  CHECK(job.client().add("n", 2) == 2);
  CHECK(job.connect_another(2s)->add("n", 1) == 3);

  RawSocket stranger(port);
  REQUIRE(stranger.send(Msg(LegacyOp::add).str("/n").i64(1)));
  CHECK(stranger.closed_by_server());
  CHECK(job.client().add("n", 0) == 3);
}

TEST_CASE("job store: a refused token ends the join at once, naming the authentication") {
  store::StoreServerOptions options;
  options.host = "127.0.0.1";
  options.token = "right";
  store::BackgroundStoreServer server(options);
  auto start = std::chrono::steady_clock::now();
  try {
    rendezvous::JobStore job(c10d_config(server.port(), false, "wrong"));
    FAIL("joined with a wrong token");
  } catch (const rendezvous::RendezvousError& e) {
    CHECK_THAT(e.what(), Catch::Contains("job=job_store_test"));
    CHECK_THAT(e.what(), Catch::Contains("authentication failed: the store refused this client's token"));
  }
  // Not the 30 s join_timeout of a store that is not up yet.
  CHECK(std::chrono::steady_clock::now() - start < 5s);
  // The right one joins.
  rendezvous::JobStore job(c10d_config(server.port(), false, "right"));
  CHECK(job.client().add("n", 1) == 1);
}
