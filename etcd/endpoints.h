// etcd endpoints as users write them: "host:port", "[v6addr]:port", a bare
// host (port 2379, etcd's client port), optionally with the scheme etcd's
// own tools print ("http://10.0.0.1:2379"), and lists of them joined by
// commas ("h1:2379,h2:2379", torchrun's --rdzv-endpoint for etcd).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::etcd {

enum class Protocol { http, https };

inline constexpr int kDefaultPort = 2379;

struct Endpoint {
  std::string host;  // an IPv6 address without its brackets
  int port = kDefaultPort;

  // "host:port", "[v6]:port" for an IPv6 address: how messages name it.
  std::string text() const;
  bool operator==(const Endpoint&) const = default;
};

// Every endpoint of `entries`, each of which may itself be a comma list, in
// order. A scheme, where given, must be `protocol`'s: an https:// endpoint
// for a client set up for http is a mistake to report, not to guess around.
// Throws EtcdError naming the entry on anything else: empty, a bad port, a
// path after the port, an unclosed bracket.
std::vector<Endpoint> parse_endpoints(const std::vector<std::string>& entries, Protocol protocol);

// True when `host` is an IPv4 or IPv6 address rather than a name: TLS then
// checks the certificate's IP addresses instead of its DNS names.
bool is_ip_address(const std::string& host);

}  // namespace cxxrun::etcd
