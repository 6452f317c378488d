// etcd's members as the rendezvous carries them (EtcdSettings::endpoints,
// rendezvous.h), and how they are read from what a user writes. etcd is
// private to rendezvous/: nothing above it (the agent, the launcher) can
// include etcd/, so this is their one way to etcd's parser (etcd/endpoints.h
// holds the syntax, and the conversion to etcd::Endpoint stays inside
// rendezvous/, in etcd_options, rendezvous/etcd_calls.h). The build tests
// build.etcd_private* check that etcd/ is out of reach.
#pragma once

#include <string>
#include <vector>

namespace cxxrun::rendezvous {

struct EtcdEndpoint {
  std::string host;  // an IPv6 address without its brackets
  int port = 0;      // as parsed: etcd's client port, 2379, where none was given

  // "host:port", "[v6]:port" for an IPv6 address: how messages name it.
  std::string text() const;
  bool operator==(const EtcdEndpoint&) const = default;
};

// Every member of `entries`, each of which may itself be a comma list
// ("h1:2379,h2,[::1]:2379"), in order, by etcd's own parser: a bare host is
// etcd's client port, and a scheme, where given, must be the protocol's
// (https:// only when `https`). Throws std::invalid_argument, one line
// naming the entry and the rule ("etcd endpoint 'e1:99999': the port must
// be a number from 1 to 65535").
std::vector<EtcdEndpoint> parse_etcd_endpoints(const std::vector<std::string>& entries, bool https);

}  // namespace cxxrun::rendezvous
