// A real store (a BackgroundStoreServer on loopback) that a test stops under
// clients whose deadline is long: the setup of every test that an agent
// leaves, or a thread gives up, in about a short deadline and not the client's
// read_timeout once its store went away. The long deadline (kLongDeadline) is
// what such a test shows is NOT waited out; it bounds the test if the code
// under test regresses.
#pragma once

#include <chrono>
#include <memory>

#include "store/client.h"
#include "store/server.h"

class VanishingStore {
 public:
  static constexpr std::chrono::seconds kLongDeadline{60};

  VanishingStore() : server_(options()) {}

  // A client of the store (connected now, so call it before stop()) whose
  // calls wait up to `deadline`.
  std::unique_ptr<cxxrun::store::StoreClient> client(
      cxxrun::store::StoreClient::Duration deadline = kLongDeadline) const {
    cxxrun::store::StoreClient::Options o;
    o.port = server_.port();
    o.timeout = deadline;
    return cxxrun::store::StoreClient::connect(o);
  }

  // Where it listens (on 127.0.0.1), for code that connects by itself.
  int port() const { return server_.port(); }

  // The store goes away: every connection closed, nothing listens on its port.
  void stop() { server_.stop(); }

 private:
  static cxxrun::store::StoreServerOptions options() {
    cxxrun::store::StoreServerOptions o;
    o.host = "127.0.0.1";
    o.port = 0;
    return o;
  }

  cxxrun::store::BackgroundStoreServer server_;
};
