#include "agent/report/health_server.h"

#include <array>
#include <cstdint>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/http.hpp>
#include <exception>
#include <spdlog/spdlog.h>
#include <system_error>
#include <unordered_set>
#include <vector>

#include "agent/report/health_report.h"
#include "net/endpoint.h"
#include "net/listener.h"

namespace cxxrun::agent {
namespace {

namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = asio::ip::tcp;
using boost::system::error_code;
using Response = http::response<http::string_body>;

constexpr std::string_view kMetricsType = "text/plain; version=0.0.4; charset=utf-8";

// Names would need a resolver, which blocks without a deadline; "localhost"
// is the one name worth knowing without one.
std::vector<tcp::endpoint> candidates(const std::string& host, int port) {
  const auto p = static_cast<unsigned short>(port);
  if (host.empty()) return net::wildcard_endpoints(port);
  if (host == "localhost") return {tcp::endpoint(asio::ip::address_v4::loopback(), p)};
  error_code ec;
  asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec)
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            "health server host must be an IP address or \"localhost\", not '" + host + "'");
  return {tcp::endpoint(address, p)};
}

void bind_and_listen(tcp::acceptor& acceptor, const std::string& host, int port) {
  if (port < 0 || port > 65535)
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            "health server port " + std::to_string(port) + " is out of range");
  if (error_code ec = net::listen_on_first(acceptor, candidates(host, port),
                                                  asio::socket_base::max_listen_connections)) {
    const std::string shown = host.empty() ? "::" : host;
    throw std::system_error(ec, "health server cannot listen on " + net::format_endpoint({shown, port}));
  }
}

// Bytes through the blank line that ends the request head, 0 while there is
// none yet. Bare "\n" line ends count too (RFC 9112 §2.2 lets a server
// accept them; hand-typed nc requests use them), which Beast's parser does
// not take: with_crlf() mends them for it.
size_t head_size(std::string_view received) {
  size_t best = 0;
  for (std::string_view end : {"\r\n\r\n", "\n\n", "\n\r\n"}) {
    const size_t at = received.find(end);
    if (at != std::string_view::npos && (best == 0 || at + end.size() < best)) best = at + end.size();
  }
  return best;
}

std::string with_crlf(std::string_view head) {
  std::string out;
  out.reserve(head.size() + 16);
  for (size_t i = 0; i < head.size(); ++i) {
    if (head[i] == '\n' && (i == 0 || head[i - 1] != '\r')) out.push_back('\r');
    out.push_back(head[i]);
  }
  return out;
}

// One response, then the connection closes: probes and Prometheus scrapers
// need no keep-alive.
Response response(http::status status, std::string_view type, std::string body) {
  Response r{status, 11};
  r.set(http::field::content_type, type);
  r.set(http::field::cache_control, "no-store");
  r.keep_alive(false);
  r.body() = std::move(body);
  r.prepare_payload();
  return r;
}

// `request` is a head Beast parsed; `bad` when it could not (not HTTP/1.x,
// or not a request line at all).
Response respond(const http::request<http::empty_body>& request, bool bad,
                 const std::function<HealthSnapshot()>& snapshot) {
  const std::string_view target = request.target();
  if (bad || (request.version() != 10 && request.version() != 11) || !target.starts_with('/'))
    return response(http::status::bad_request, "text/plain", "bad request\n");
  const std::string_view path = target.substr(0, target.find('?'));
  const bool healthz = path == "/healthz";
  if (!healthz && path != "/metrics") return response(http::status::not_found, "text/plain", "not found\n");
  if (request.method() != http::verb::get) {
    Response r = response(http::status::method_not_allowed, "text/plain", "only GET\n");
    r.set(http::field::allow, "GET");
    return r;
  }
  try {
    HealthSnapshot s = snapshot();
    if (healthz)
      return response(reports_healthy(s) ? http::status::ok : http::status::service_unavailable,
                      "application/json", health_json(s));
    return response(http::status::ok, kMetricsType, prometheus_text(s));
  } catch (const std::exception& e) {
    spdlog::warn("health server: the snapshot failed: {}", e.what());
    return response(http::status::internal_server_error, "text/plain", "snapshot failed\n");
  }
}

class Connection;

}  // namespace

struct HealthServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io, std::function<HealthSnapshot()> s)
      : listener(io, "health server"), snapshot(std::move(s)) {}

  void adopt(tcp::socket socket);
  void close();

  net::AcceptLoop listener;
  std::function<HealthSnapshot()> snapshot;
  // Live connections, so close() can end them; each removes itself when
  // destroyed, and holds the Impl alive until then.
  std::unordered_set<Connection*> connections;
  uint64_t accepted = 0;  // numbers connections in the order they came
  bool saturated = false;
  bool closed = false;
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<HealthServer::Impl> server, tcp::socket socket)
      : server_(std::move(server)),
        socket_(std::move(socket)),
        deadline_(socket_.get_executor()),
        serial_(++server_->accepted) {
    server_->connections.insert(this);
    parser_.header_limit(2 * HealthServer::kMaxRequestBytes);  // with_crlf may add a byte per line
    parser_.eager(false);
  }
  ~Connection() { server_->connections.erase(this); }

  void start() {
    deadline_.expires_after(HealthServer::kDeadline);
    deadline_.async_wait([self = shared_from_this()](const error_code& ec) {
      if (ec) return;
      spdlog::debug("health server: closing a client that took over {} s", HealthServer::kDeadline.count());
      self->stop();
    });
    read_head();
  }

  uint64_t serial() const { return serial_; }
  bool stopped() const { return stopped_; }
  // Sending its answer: the one state worth keeping a client in when room
  // is needed.
  bool answering() const { return answering_; }

  // Idempotent; pending handlers then finish with operation_aborted and
  // release this connection.
  void stop() {
    stopped_ = true;
    answering_ = false;
    error_code ignored;
    socket_.close(ignored);
    deadline_.cancel();
  }

 private:
  // The head only: a body (a POST's) is never read, only drained after.
  void read_head() {
    socket_.async_read_some(asio::buffer(chunk_), [self = shared_from_this()](const error_code& ec, size_t n) {
      self->on_read(ec, n);
    });
  }

  void on_read(const error_code& ec, size_t n) {
    if (ec) return stop();
    received_.append(chunk_.data(), n);
    const size_t head = head_size(received_);
    if (head == 0 || head > HealthServer::kMaxRequestBytes) {
      if (head == 0 && received_.size() < HealthServer::kMaxRequestBytes) return read_head();
      spdlog::debug("health server: closing a client whose request head passed {} bytes",
                    HealthServer::kMaxRequestBytes);
      return stop();
    }
    // Beast parses; a head it cannot parse (not HTTP/1.x, not a request
    // line at all) is answered 400.
    const std::string crlf = with_crlf(std::string_view(received_).substr(0, head));
    error_code bad;
    parser_.put(asio::buffer(crlf), bad);
    response_ = respond(parser_.get(), bad || !parser_.is_header_done(), server_->snapshot);
    answering_ = true;
    http::async_write(socket_, response_, [self = shared_from_this()](const error_code& ec, size_t) {
      self->answering_ = false;
      if (ec) return self->stop();
      self->linger();
    });
  }

  // Closing with unread input (a request body) would send RST, which can
  // destroy the response in the client's buffers; so half-close and drain
  // until the client closes too, still under the deadline.
  void linger() {
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_send, ignored);
    drain();
  }

  void drain() {
    socket_.async_read_some(asio::buffer(chunk_), [self = shared_from_this()](const error_code& ec, size_t) {
      if (ec) return self->stop();
      self->drain();
    });
  }

  std::shared_ptr<HealthServer::Impl> server_;
  tcp::socket socket_;
  asio::steady_timer deadline_;
  std::array<char, 2048> chunk_;
  std::string received_;
  http::request_parser<http::empty_body> parser_;
  Response response_;
  const uint64_t serial_;
  bool stopped_ = false;
  bool answering_ = false;
};

}  // namespace

// At the cap the new client is served and the oldest one that is not
// being answered (silent, trickling its head, or lingering after its
// answer) is closed instead: refusing the new one would let any local user
// who holds kMaxConnections idle sockets fail every liveness probe, while a
// probe sends its request at once and is answered long before the
// kMaxConnections clients after it could push it out.
void HealthServer::Impl::adopt(tcp::socket socket) {
  size_t open = 0;
  Connection* oldest_idle = nullptr;
  Connection* oldest = nullptr;
  for (Connection* c : connections) {
    if (c->stopped()) continue;  // its socket is closed; it goes with its last handler
    ++open;
    if (!oldest || c->serial() < oldest->serial()) oldest = c;
    if (!c->answering() && (!oldest_idle || c->serial() < oldest_idle->serial())) oldest_idle = c;
  }
  if (open >= kMaxConnections) {
    if (!saturated)
      spdlog::warn("health server: {} connections open; closing the oldest idle one for each new client",
                   kMaxConnections);
    saturated = true;
    (oldest_idle ? oldest_idle : oldest)->stop();
  } else {
    saturated = false;
  }
  std::make_shared<Connection>(shared_from_this(), std::move(socket))->start();
}

void HealthServer::Impl::close() {
  if (closed) return;
  closed = true;
  listener.close();
  for (Connection* c : connections) c->stop();
}

HealthServer::HealthServer(asio::io_context& io, const std::string& host, int port,
                           std::function<HealthSnapshot()> snapshot)
    : impl_(std::make_shared<Impl>(io, std::move(snapshot))) {
  bind_and_listen(impl_->listener.acceptor(), host, port);
  const tcp::endpoint bound = impl_->listener.acceptor().local_endpoint();
  port_ = bound.port();
  address_ = net::endpoint_text(bound);
  Impl* impl = impl_.get();
  impl_->listener.start(impl_, [impl](tcp::socket socket) { impl->adopt(std::move(socket)); });
  spdlog::info("health server listening on {} (/healthz, /metrics)", address_);
}

HealthServer::~HealthServer() { close(); }

void HealthServer::close() { impl_->close(); }

}  // namespace cxxrun::agent
