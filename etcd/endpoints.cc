#include "etcd/endpoints.h"

#include <arpa/inet.h>

#include <algorithm>
#include <charconv>

#include "etcd/errors.h"

namespace cxxrun::etcd {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad(std::string_view entry, std::string_view why) {
  throw EtcdError("etcd endpoint '" + std::string(entry) + "': " + std::string(why));
}

int parse_port(std::string_view entry, std::string_view text) {
  int port = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), port);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || port < 1 || port > 65535)
    bad(entry, "the port must be a number from 1 to 65535");
  return port;
}

Endpoint parse_one(std::string_view entry, Protocol protocol) {
  std::string_view rest = entry;
  for (auto [scheme, proto] : {std::pair{std::string_view("http://"), Protocol::http},
                               std::pair{std::string_view("https://"), Protocol::https}}) {
    if (rest.substr(0, scheme.size()) == scheme) {
      if (proto != protocol)
        bad(entry, protocol == Protocol::https ? "an http:// endpoint for a client set up for https"
                                               : "an https:// endpoint for a client set up for http");
      rest.remove_prefix(scheme.size());
    }
  }
  // etcdctl prints member URLs with a trailing slash at times; nothing else
  // may follow the port.
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) bad(entry, "a path after host:port");
  Endpoint endpoint;
  if (!rest.empty() && rest.front() == '[') {
    auto close = rest.find(']');
    if (close == std::string_view::npos) bad(entry, "'[' without ']'");
    endpoint.host = std::string(rest.substr(1, close - 1));
    auto after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') bad(entry, "expected ':port' after ']'");
      endpoint.port = parse_port(entry, after.substr(1));
    }
  } else if (std::count(rest.begin(), rest.end(), ':') > 1) {
    endpoint.host = std::string(rest);  // a bare IPv6 address: its last group is no port
  } else if (auto colon = rest.find(':'); colon != std::string_view::npos) {
    endpoint.host = std::string(rest.substr(0, colon));
    endpoint.port = parse_port(entry, rest.substr(colon + 1));
  } else {
    endpoint.host = std::string(rest);
  }
  if (endpoint.host.empty()) bad(entry, "no host");
  return endpoint;
}

}  // namespace

std::string Endpoint::text() const {
  bool v6 = host.find(':') != std::string::npos;
  return (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

std::vector<Endpoint> parse_endpoints(const std::vector<std::string>& entries, Protocol protocol) {
  std::vector<Endpoint> out;
  for (const auto& entry : entries) {
    std::string_view rest = entry;
    while (true) {
      auto comma = rest.find(',');
      auto piece = trim(rest.substr(0, comma));
      if (piece.empty()) bad(entry, "an empty endpoint in the list");
      out.push_back(parse_one(piece, protocol));
      if (comma == std::string_view::npos) break;
      rest.remove_prefix(comma + 1);
    }
  }
  if (out.empty()) throw EtcdError("etcd: no endpoints given");
  return out;
}

bool is_ip_address(const std::string& host) {
  unsigned char buf[sizeof(struct in6_addr)];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

}  // namespace cxxrun::etcd
