// The agent's HTTP endpoint for probes and scrapers (torchrun only has a
// Meta-internal hook for this, docs/torchrun-compat.md §7). It runs on the caller's
// io_context, the agent's one event loop, so the snapshot callback reads the
// supervisor's state on the supervisor's own thread with no locking.
//
//   GET /healthz  200 (503 when the state is UNKNOWN, UNHEALTHY or FAILED)
//                 application/json, see health_report.h
//   GET /metrics  200 text/plain; version=0.0.4 (Prometheus)
//   other paths   404; other methods on those two paths: 405
//   bad request   400
//
// HTTP/1.1 through Boost.Beast (request heads parsed, responses written);
// bare "\n" line ends are taken too, for requests typed into nc. Each
// connection carries one request and is closed after the response. A
// client gets kDeadline in total to send its head (at most kMaxRequestBytes)
// and read the answer; one that is slow, silent or oversized is closed, and
// at most kMaxConnections are open at once, so no client can stall the loop
// or exhaust the agent's descriptors. At that cap a new client is still
// served: the oldest one not being answered is closed to make room, so
// idle or trickling clients cannot keep a probe out.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "agent/report/health_snapshot.h"

namespace boost::asio {
class io_context;
}

namespace cxxrun::agent {

class HealthServer {
 public:
  static constexpr std::chrono::seconds kDeadline{5};
  static constexpr size_t kMaxRequestBytes = 8192;
  static constexpr size_t kMaxConnections = 32;

  // Binds and listens before returning: a taken port or an unusable host
  // throws std::system_error whose what() names host:port. `host` is an IP
  // address, "localhost", or empty for every interface (dual-stack "::",
  // else 0.0.0.0). Port 0 picks a free one (port() says which). Serves once
  // `io` runs; `snapshot` is called on that thread, once per request.
  HealthServer(boost::asio::io_context& io, const std::string& host, int port,
               std::function<HealthSnapshot()> snapshot);
  // Same thread rule as close(); destroy it before `io`.
  ~HealthServer();
  HealthServer(const HealthServer&) = delete;
  HealthServer& operator=(const HealthServer&) = delete;

  // The bound port; any thread.
  int port() const { return port_; }
  // "host:port" as bound, e.g. "127.0.0.1:8080" or "[::]:8080".
  const std::string& address() const { return address_; }

  // Stops accepting and closes every open connection. Idempotent. Call it on
  // the thread that runs `io`, or while nothing runs it.
  void close();

  // Defined in health_server.cc; named here only so its helpers can see it.
  struct Impl;

 private:
  std::shared_ptr<Impl> impl_;
  int port_ = 0;
  std::string address_;
};

}  // namespace cxxrun::agent
