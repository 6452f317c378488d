#include "net/endpoint.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <string.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <charconv>
#include <memory>
#include <stdexcept>
#include <system_error>

namespace cxxrun::net {
namespace {

bool valid_host_char(char c) {
  unsigned char u = static_cast<unsigned char>(c);
  return std::isalnum(u) || c == '_' || c == '.' || c == ':' || c == '-';
}

std::string quoted(std::string_view text) { return "'" + std::string(text) + "'"; }

int parse_port(std::string_view digits, std::string_view whole) {
  int port = -1;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), port);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size() || port < 0 ||
      port > 65535)
    throw std::invalid_argument("the port of endpoint " + quoted(whole) +
                                " must be an integer between 0 and 65535");
  return port;
}

struct AddrInfoDeleter {
  void operator()(addrinfo* ai) const { freeaddrinfo(ai); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr resolve(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* out = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &out);
  if (rc != 0)
    throw std::system_error(std::make_error_code(std::errc::address_not_available),
                            "cannot resolve " + quoted(host) + ": " + gai_strerror(rc));
  return AddrInfoPtr(out);
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// errno of bind(), 0 on success. SO_REUSEADDR matches what TCPStore sets, so a
// port left in TIME_WAIT by an earlier job does not count as taken.
int try_bind(const addrinfo& ai, Fd& sock) {
  if (sock.get() < 0) return errno;
  int one = 1;
  setsockopt(sock.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  return bind(sock.get(), ai.ai_addr, ai.ai_addrlen) == 0 ? 0 : errno;
}

int bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::system_error(errno, std::generic_category(), "getsockname");
  if (addr.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// True when `host` resolves to an address assigned to one of this machine's
// interfaces (an agent started with its own IP as the endpoint, or in a
// network namespace that owns that address).
bool is_interface_address(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* resolved = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &resolved) != 0) return false;
  ifaddrs* ifs = nullptr;
  bool found = false;
  if (getifaddrs(&ifs) == 0) {
    for (addrinfo* a = resolved; a && !found; a = a->ai_next) {
      for (ifaddrs* i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != a->ai_family) continue;
        if (a->ai_family == AF_INET)
          found = reinterpret_cast<sockaddr_in*>(a->ai_addr)->sin_addr.s_addr ==
                  reinterpret_cast<sockaddr_in*>(i->ifa_addr)->sin_addr.s_addr;
        else if (a->ai_family == AF_INET6)
          found = memcmp(&reinterpret_cast<sockaddr_in6*>(a->ai_addr)->sin6_addr,
                         &reinterpret_cast<sockaddr_in6*>(i->ifa_addr)->sin6_addr, sizeof(in6_addr)) == 0;
      }
    }
    freeifaddrs(ifs);
  }
  freeaddrinfo(resolved);
  return found;
}

}  // namespace


Endpoint parse_endpoint(std::string_view text, int default_port) {
  std::string_view whole = text;
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  if (text.empty()) return {"localhost", default_port};

  std::string_view host = text;
  int port = default_port;
  if (text.front() == '[') {
    auto close = text.find(']');
    if (close == std::string_view::npos)
      throw std::invalid_argument("endpoint " + quoted(whole) + " has '[' without ']'");
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':')
        throw std::invalid_argument("endpoint " + quoted(whole) +
                                    " has text after ']' that is not ':port'");
      port = parse_port(rest.substr(1), whole);
    }
  } else if (auto colon = text.rfind(':');
             colon != std::string_view::npos && text.find(':') == colon) {
    host = text.substr(0, colon);
    port = parse_port(text.substr(colon + 1), whole);
  }

  bool ok = !host.empty();
  for (char c : host) ok = ok && valid_host_char(c);
  // No hostname holds a ':', so a host with one must be a whole IPv6
  // address: ":::" would otherwise go to the resolver and fail only at
  // join_timeout, as a connection that never came.
  in6_addr v6{};
  if (ok && host.find(':') != std::string_view::npos)
    ok = inet_pton(AF_INET6, std::string(host).c_str(), &v6) == 1;
  if (!ok)
    throw std::invalid_argument("the host of endpoint " + quoted(whole) +
                                " must be a hostname, an IPv4 address or an IPv6 address");
  return {std::string(host), port};
}

std::string format_endpoint(const Endpoint& endpoint) {
  std::string port = std::to_string(endpoint.port);
  if (endpoint.host.find(':') != std::string::npos) return "[" + endpoint.host + "]:" + port;
  return endpoint.host + ":" + port;
}

int pick_free_port(const std::string& host) {
  AddrInfoPtr list = resolve(host, 0);
  int last_error = EADDRNOTAVAIL;
  for (addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    Fd sock(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (int err = try_bind(*ai, sock); err != 0) {
      last_error = err;
      continue;
    }
    return bound_port(sock.get());
  }
  throw std::system_error(last_error, std::generic_category(),
                          "cannot bind a port on " + quoted(host));
}

bool port_in_use(const std::string& host, int port) {
  AddrInfoPtr list;
  try {
    list = resolve(host, port);
  } catch (const std::system_error&) {
    return false;
  }
  for (addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    Fd sock(socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
    if (try_bind(*ai, sock) == EADDRINUSE) return true;
  }
  return false;
}

std::string address_text(const sockaddr_storage& address, socklen_t length) {
  char text[NI_MAXHOST] = {};
  const int rc = getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, text, sizeof text, nullptr, 0,
                             NI_NUMERICHOST);
  if (rc != 0) throw std::system_error(std::make_error_code(std::errc::address_not_available),
                                       std::string("getnameinfo: ") + gai_strerror(rc));
  std::string ip = text;
  constexpr std::string_view mapped = "::ffff:";
  if (address.ss_family == AF_INET6 && ip.starts_with(mapped) && ip.find('.') != std::string::npos)
    ip.erase(0, mapped.size());
  return ip;
}

std::string address_toward(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string where = format_endpoint({host, port});
  if (int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0 || !found)
    throw std::system_error(std::make_error_code(std::errc::address_not_available),
                            "cannot resolve " + where + ": " + gai_strerror(rc));
  AddrInfoPtr list(found);
  Fd sock(socket(found->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_storage local{};
  socklen_t len = sizeof local;
  if (sock.get() < 0 || ::connect(sock.get(), found->ai_addr, found->ai_addrlen) != 0 ||
      getsockname(sock.get(), reinterpret_cast<sockaddr*>(&local), &len) != 0)
    throw std::system_error(errno, std::generic_category(), "no route from this host to " + where);
  return address_text(local, len);
}

bool is_local_host(std::string_view host) {
  if (host.size() > 1 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  for (std::string_view name :
       {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})
    if (iequals(host, name)) return true;

  std::string h(host);
  in_addr v4{};
  if (inet_pton(AF_INET, h.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127) return true;
  in6_addr v6{};
  if (inet_pton(AF_INET6, h.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    if (IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127) return true;
  }
  // Wildcards mean "every interface", i.e. other nodes too.
  if (h == "0.0.0.0" || h == "::") return false;

  char self[256] = {};
  if (gethostname(self, sizeof self - 1) == 0 && iequals(host, self)) return true;
  return is_interface_address(h);
}

}  // namespace cxxrun::net
