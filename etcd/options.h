// How to reach an etcd cluster: shared by Client and Watch.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "etcd/endpoints.h"

namespace cxxrun::etcd {

struct Options {
  // Members' client endpoints, parsed once where they were written
  // (parse_endpoints, endpoints.h, which checks a scheme against
  // `protocol`). Requests go to the first until it fails, then on down the
  // list, round and round.
  std::vector<Endpoint> endpoints{Endpoint{"127.0.0.1"}};
  Protocol protocol = Protocol::http;
  // https only. cacert empty: the system's CAs. cert and key together: our
  // client certificate, for members run with --client-cert-auth.
  std::string cacert;
  std::string cert;
  std::string key;
  // For clusters with authentication enabled; empty: send no token.
  std::string username;
  std::string password;
  // Default deadline of each call (and, for a watch, how long it may go on
  // failing to reach any member before next() gives up).
  std::chrono::milliseconds timeout{std::chrono::seconds(10)};
};

}  // namespace cxxrun::etcd
