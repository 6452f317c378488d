// HttpConnection on Beast: each synchronous call starts the asynchronous
// operation and runs the connection's own io_context until it completes or
// the deadline passes (then everything in flight is cancelled and drained,
// so no handler outlives the call's locals). Only the watch's stream read
// stays pending across calls, owned by Impl.
#include "etcd/http_connection.h"

#include <openssl/ssl.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cerrno>
#include <functional>
#include <optional>
#include <vector>

#include "etcd/handshake.h"
#include "etcd/tls.h"

namespace cxxrun::etcd {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using Kind = TransportError::Kind;

// A range over a large prefix can be big; etcd itself caps requests, not
// answers. Past this the answer is refused rather than held.
constexpr uint64_t kBodyLimit = uint64_t(256) << 20;

std::string broken(const error_code& ec) {
  if (ec == http::error::end_of_stream) return "the member closed the connection";
  return closed_text(ec);
}

}  // namespace

struct HttpConnection::Impl {
  Impl(Endpoint e, std::shared_ptr<TlsContext> t) : endpoint(std::move(e)), tls(std::move(t)), resolver(ioc) {}

  asio::io_context ioc;
  Endpoint endpoint;
  std::shared_ptr<TlsContext> tls;
  tcp::resolver resolver;
  std::optional<beast::tcp_stream> plain;
  std::optional<beast::ssl_stream<beast::tcp_stream>> secure;
  beast::tcp_stream* connecting = nullptr;  // the socket of a connect in progress
  beast::flat_buffer buffer;
  std::optional<http::response_parser<http::string_body>> stream;  // open_stream's answer
  std::string stream_bytes;  // its body as the parser hands it over
  // The parser keeps a reference to its chunk callback: it lives here.
  std::function<size_t(uint64_t, beast::string_view, error_code&)> on_chunk =
      [this](uint64_t, beast::string_view piece, error_code&) {
        stream_bytes.append(piece.data(), piece.size());
        return piece.size();
      };
  bool reading = false;      // a stream read is pending
  error_code read_error;
  std::atomic<bool> interrupted{false};

  bool connected() const { return plain || secure; }
  beast::tcp_stream& tcp_layer() { return secure ? secure->next_layer() : *plain; }

  template <class F>
  void with_stream(F&& f) {
    if (secure) f(*secure);
    else f(*plain);
  }

  void cancel_io() {
    resolver.cancel();
    // A connect to a member that drops SYNs (a host that is down, a
    // firewall) would otherwise finish only when the kernel gives up, about
    // two minutes later, whatever the deadline.
    if (connecting) {
      error_code ignored;
      connecting->socket().close(ignored);
    }
    if (connected()) tcp_layer().cancel();
  }

  void throw_if_interrupted(bool sent) {
    if (interrupted) {
      close();
      throw TransportError(Kind::cancelled, sent, false, "cancelled");
    }
  }

  // Runs the loop until `done`. At the deadline every operation is cancelled
  // and run to its end (so `done` is set), and the result is false.
  bool run(const bool& done, Clock::time_point deadline) {
    ioc.restart();
    while (!done) {
      if (ioc.run_one_until(deadline) > 0) continue;
      if (done) break;
      if (Clock::now() < deadline && !ioc.stopped()) continue;
      cancel_io();
      ioc.restart();
      while (!done && ioc.run_one() > 0) {
      }
      return false;
    }
    return true;
  }

  void connect(Clock::time_point deadline) {
    close();
    throw_if_interrupted(false);
    bool done = false;
    error_code ec;
    std::vector<tcp::endpoint> addresses;
    // A member given by its address needs no lookup. Asio's resolver runs
    // each io_context's lookups on a thread of its own: a thread per
    // connection, 5,000 of them for 3,000 simulated agents over etcd.
    if (const auto address = asio::ip::make_address(endpoint.host, ec); !ec) {
      addresses.emplace_back(address, endpoint.port);
    } else {
      resolver.async_resolve(endpoint.host, std::to_string(endpoint.port),
                             [&](error_code e, const tcp::resolver::results_type& r) {
                               ec = e;
                               for (const auto& entry : r) addresses.push_back(entry.endpoint());
                               done = true;
                             });
      const bool in_time = run(done, deadline);
      throw_if_interrupted(false);
      if (!in_time) throw TransportError(Kind::unreachable, false, false, "resolving the host timed out");
      if (ec)  // no such host is permanent; a failing resolver may recover
        throw TransportError(Kind::unreachable, false, ec == asio::error::host_not_found,
                             "cannot resolve host: " + ec.message());
    }

    beast::tcp_stream socket(ioc);
    done = false;
    socket.async_connect(addresses, [&](error_code e, const tcp::endpoint&) {
      ec = e;
      done = true;
    });
    connecting = &socket;
    const bool in_time = run(done, deadline);
    connecting = nullptr;
    throw_if_interrupted(false);
    if (!in_time) throw TransportError(Kind::unreachable, false, false, "connect timed out");
    if (ec) throw TransportError(Kind::unreachable, false, false, ec.message());
    socket.socket().set_option(tcp::no_delay(true), ec);
    if (!tls) {
      plain.emplace(std::move(socket));
      return;
    }
    secure.emplace(std::move(socket), tls->asio());
    handshake(deadline);
  }

  // The member's certificate checked as etcd's Go clients do (handshake.h).
  void handshake(Clock::time_point deadline) {
    SSL* ssl = secure->native_handle();
    expect_member(ssl, endpoint.host);
    bool done = false;
    error_code ec;
    secure->async_handshake(asio::ssl::stream_base::client, [&](error_code e) {
      ec = e;
      done = true;
    });
    bool in_time = run(done, deadline);
    throw_if_interrupted(false);
    if (!in_time) {
      close();
      throw TransportError(Kind::unreachable, false, false, "TLS handshake timed out");
    }
    if (!ec) return;
    const TransportError error = handshake_error(ec, SSL_get_verify_result(ssl), *tls);
    close();
    throw error;
  }

  // A kept-alive connection is usable only if nothing arrived while it was
  // idle: an end of stream (the member closed it, or died) or anything else
  // means it is not. Checked before the request goes out, so such a
  // connection costs no request whose fate is unknown.
  bool stale() {
    if (buffer.size() > 0) return true;
    char c;
    ssize_t n = ::recv(tcp_layer().socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return !(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
  }

  http::request<http::string_body> make(const HttpRequest& request) const {
    http::request<http::string_body> r{http::verb::post, request.target, 11};
    r.set(http::field::host, endpoint.text());
    r.set(http::field::content_type, "application/json");
    r.set(http::field::user_agent, "cxxrun-etcd");
    if (!request.token.empty()) r.set(http::field::authorization, request.token);
    r.set(kGatewayRequireLeaderHeader, "true");
    r.body() = request.body;
    r.keep_alive(true);
    r.prepare_payload();
    return r;
  }

  void send(const HttpRequest& request, Clock::time_point deadline, Clock::time_point connect_deadline) {
    throw_if_interrupted(false);
    if (connected() && stale()) close();
    if (!connected()) connect(std::min(deadline, connect_deadline));
    auto r = make(request);
    bool done = false;
    error_code ec;
    with_stream([&](auto& s) {
      http::async_write(s, r, [&](error_code e, size_t) {
        ec = e;
        done = true;
      });
    });
    await(done, deadline);
    if (ec) {
      close();
      throw TransportError(Kind::lost, true, false, "sending the request: " + broken(ec));
    }
  }

  // Runs the loop until `done`; a deadline that passes first closes the
  // connection and throws (the request may have been sent).
  void await(bool& done, Clock::time_point deadline) {
    const bool in_time = run(done, deadline);
    throw_if_interrupted(true);
    if (!in_time) {
      close();
      throw TransportError(Kind::timeout, true, false, "no answer before the deadline");
    }
  }

  [[noreturn]] void receive_failed(const error_code& ec) {
    close();
    if (is_alert(ec))
      throw TransportError(Kind::tls, false, true,
                           "TLS: the member refused the connection: " + ssl_reason(ec) + " (" + tls->cert_note() + ")");
    throw TransportError(Kind::lost, true, false, "reading the answer: " + broken(ec));
  }

  template <class Read>
  void receive(Read&& read, Clock::time_point deadline) {
    bool done = false;
    error_code ec;
    with_stream([&](auto& s) {
      read(s, [&](error_code e, size_t) {
        ec = e;
        done = true;
      });
    });
    await(done, deadline);
    if (ec) receive_failed(ec);
  }

  HttpResponse post(const HttpRequest& request, Clock::time_point deadline, Clock::time_point connect_deadline);
  HttpResponse open_stream(const HttpRequest& request, Clock::time_point deadline, Clock::time_point connect_deadline);
  bool read_stream(std::string& out, Clock::time_point deadline);

  void close() {
    error_code ignored;
    resolver.cancel();
    if (connected()) {
      tcp_layer().socket().shutdown(tcp::socket::shutdown_both, ignored);
      tcp_layer().close();
    }
    // A pending stream read refers to the parser: let it finish (aborted)
    // before the parser goes.
    if (reading) {
      ioc.restart();
      while (reading && ioc.run_one_for(std::chrono::seconds(1)) > 0) {
      }
      reading = false;
    }
    secure.reset();
    plain.reset();
    stream.reset();
    buffer.clear();
    stream_bytes.clear();
  }
};

HttpConnection::HttpConnection(Endpoint endpoint, std::shared_ptr<TlsContext> tls)
    : impl_(std::make_unique<Impl>(std::move(endpoint), std::move(tls))) {}

HttpConnection::~HttpConnection() { impl_->close(); }

const Endpoint& HttpConnection::endpoint() const { return impl_->endpoint; }

namespace {

// What Asio or OpenSSL might still throw (allocation of an SSL object, a
// socket option) becomes a TransportError, so callers see one kind of
// failure. Whether the request went out is unknown then: say it may have.
template <class F>
auto guarded(HttpConnection& connection, F&& f) {
  try {
    return f();
  } catch (const TransportError&) {
    throw;
  } catch (const std::exception& e) {
    connection.close();
    throw TransportError(Kind::lost, true, false, e.what());
  }
}

}  // namespace

HttpResponse HttpConnection::post(const HttpRequest& request, Clock::time_point deadline,
                                  Clock::time_point connect_deadline) {
  return guarded(*this, [&] { return impl_->post(request, deadline, connect_deadline); });
}

HttpResponse HttpConnection::open_stream(const HttpRequest& request, Clock::time_point deadline,
                                         Clock::time_point connect_deadline) {
  return guarded(*this, [&] { return impl_->open_stream(request, deadline, connect_deadline); });
}

bool HttpConnection::read_stream(std::string& out, Clock::time_point deadline) {
  return guarded(*this, [&] { return impl_->read_stream(out, deadline); });
}

HttpResponse HttpConnection::Impl::post(const HttpRequest& request, Clock::time_point deadline,
                                        Clock::time_point connect_deadline) {
  bool fresh = !connected();
  send(request, deadline, connect_deadline);
  http::response_parser<http::string_body> parser;
  parser.body_limit(kBodyLimit);
  try {
    receive([&](auto& s, auto&& handler) { http::async_read(s, buffer, parser, handler); }, deadline);
  } catch (const TransportError& e) {
    // An https member closes on a plain request without a byte of answer;
    // so would one that died just then, so this is a hint, not a verdict.
    if (fresh && !tls && e.kind == Kind::lost && !parser.got_some())
      throw TransportError(e.kind, e.sent, e.permanent,
                           std::string(e.what()) + " without answering (does it serve https?)");
    throw;
  }
  auto& response = parser.get();
  HttpResponse out{static_cast<int>(response.result_int()), std::move(response.body())};
  if (!response.keep_alive()) close();
  return out;
}

HttpResponse HttpConnection::Impl::open_stream(const HttpRequest& request, Clock::time_point deadline,
                                               Clock::time_point connect_deadline) {
  close();
  send(request, deadline, connect_deadline);
  stream.emplace();
  stream->body_limit(boost::none);
  receive([&](auto& s, auto&& handler) { http::async_read_header(s, buffer, *stream, handler); }, deadline);
  int status = static_cast<int>(stream->get().result_int());
  if (status != 200) {
    receive([&](auto& s, auto&& handler) { http::async_read(s, buffer, *stream, handler); }, deadline);
    HttpResponse out{status, std::move(stream->get().body())};
    close();
    return out;
  }
  // Chunks go straight to stream_bytes instead of growing the body.
  stream->on_chunk_body(on_chunk);
  return {status, {}};
}

bool HttpConnection::Impl::read_stream(std::string& out, Clock::time_point deadline) {
  throw_if_interrupted(true);
  if (!stream) throw TransportError(Kind::lost, true, false, "no stream open");
  if (!reading) {
    reading = true;
    read_error = {};
    with_stream([&](auto& s) {
      http::async_read_some(s, buffer, *stream, [this](error_code e, size_t) {
        read_error = e;
        reading = false;
      });
    });
  }
  ioc.restart();
  while (reading) {
    // A deadline already passed still takes what has arrived (a watch's
    // events read between two waits): run_one_until would not look.
    if (Clock::now() >= deadline) {
      ioc.poll();
      if (reading) return false;
      break;
    }
    if (ioc.run_one_until(deadline) == 0 && reading) return false;
  }
  throw_if_interrupted(true);
  out += stream_bytes;
  stream_bytes.clear();
  // An answer without chunked encoding keeps its bytes in the body.
  out += stream->get().body();
  stream->get().body().clear();
  if (read_error) receive_failed(read_error);
  if (stream->is_done()) {
    close();
    throw TransportError(Kind::lost, true, false, "the member ended the stream");
  }
  return true;
}

void HttpConnection::interrupt() {
  impl_->interrupted = true;
  asio::post(impl_->ioc, [d = impl_.get()] { d->cancel_io(); });
}

void HttpConnection::close() { impl_->close(); }

}  // namespace cxxrun::etcd
