// Rendezvous endpoints (`host[:port]`, IPv6 as `[addr]` or `[addr]:port`) and
// the two port probes the launcher needs before it starts anything.
#pragma once

#include <sys/socket.h>

#include <string>
#include <string_view>

namespace cxxrun::net {

// Passed as default_port when the caller insists on an explicit port; the
// parsed Endpoint then carries it back so the caller can word the error.
inline constexpr int kNoPort = -1;

struct Endpoint {
  std::string host;  // IPv6 without brackets
  int port = kNoPort;
};

// torch's parse_rendezvous_endpoint: empty means "localhost"; the port must be
// 0..65535; the host may hold only word characters, '.', ':' and '-'.
// Unlike torch, a bare IPv6 address ("::1", more than one ':') is taken whole
// as the host instead of splitting off its last group as a port.
// Throws std::invalid_argument with a one-line message naming `text`.
Endpoint parse_endpoint(std::string_view text, int default_port);

// "host:port", or "[addr]:port" when host is IPv6.
std::string format_endpoint(const Endpoint& endpoint);

// A port the OS reports free on `host` right now (bind port 0, read it back).
// Throws std::system_error when host cannot be resolved or bound.
int pick_free_port(const std::string& host);

// True when binding host:port fails with EADDRINUSE on any address `host`
// resolves to. Other failures (non-local address, unknown host) say nothing
// about the port and return false.
bool port_in_use(const std::string& host, int port);

// This host's address as a peer at host:port sees it: the local address a
// connection there leaves from (a UDP connect: no packet is sent). The one
// answer to "which address do the others reach me by" for a node that has
// no connection yet; io::local_ip() gives the same for a connected socket.
// An IPv4-mapped IPv6 address comes back as its IPv4 form. Throws
// std::system_error naming host:port when it cannot be resolved or reached.
std::string address_toward(const std::string& host, int port);

// The numeric text of a socket address ("10.0.0.5", "fe80::1"; a v4-mapped
// address as its IPv4 form).
std::string address_text(const sockaddr_storage& address, socklen_t length);

// Loopback names and addresses, or this machine's own hostname. Wildcards
// (0.0.0.0, ::) are not local: they mean "every interface", i.e. other nodes.
bool is_local_host(std::string_view host);

}  // namespace cxxrun::net
