// GrpcConnection on Asio: while connected, one read is always pending and
// feeds what arrives to the HTTP/2 session (grpc_session.h), whose output is
// written as it appears, so the member's SETTINGS and PINGs are answered
// whenever the loop runs. Each synchronous call runs the connection's own
// io_context until its stream has its answer or the deadline passes; a
// connection given up is closed and its operations drained, so no handler
// outlives the call's locals. Reaching the member (lookup, connect, TLS)
// is grpc_dial.h's.
#include "etcd/grpc_connection.h"

#include <openssl/ssl.h>

#include <atomic>
#include <utility>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/write.hpp>
#include <optional>
#include <vector>

#include "etcd/grpc_dial.h"
#include "etcd/grpc_session.h"
#include "etcd/handshake.h"
#include "etcd/tls.h"

namespace cxxrun::etcd {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using error_code = boost::system::error_code;
using Kind = TransportError::Kind;

// Reads start small (thousands of idle connections for simulated agents)
// and grow for an answer that fills them (a range over a large prefix).
constexpr size_t kReadSize = 16 << 10, kReadSizeMax = 256 << 10;
constexpr uint32_t kRefusedStream = 7;  // HTTP/2's REFUSED_STREAM: not processed at all

std::string status_text(const GrpcStream& s) {
  if (!s.has_status) return "";
  return ": status " + std::to_string(s.status.code) + (s.status.message.empty() ? "" : " (" + s.status.message + ")");
}

}  // namespace

struct GrpcConnection::Impl {
  Impl(Endpoint e, std::shared_ptr<TlsContext> t) : endpoint(std::move(e)), tls(std::move(t)), dial(ioc, endpoint) {}

  asio::io_context ioc;
  Endpoint endpoint;
  std::shared_ptr<TlsContext> tls;
  GrpcDial dial;
  std::optional<tcp::socket> plain;
  std::optional<asio::ssl::stream<tcp::socket>> secure;
  std::unique_ptr<GrpcSession> session;
  std::vector<char> input = std::vector<char>(kReadSize);
  std::string output;   // the session's bytes waiting for the write in flight
  std::string writing;  // the bytes of the write in flight
  bool reading = false, write_pending = false;
  error_code read_error, write_error;
  std::string protocol_error;  // the member's bytes were not HTTP/2
  int32_t stream_id = 0;       // open_stream's
  std::atomic<bool> interrupted{false};

  bool connected() const { return plain || secure; }
  tcp::socket& tcp_layer() { return secure ? secure->next_layer() : *plain; }
  bool broken() const { return read_error || write_error || !protocol_error.empty(); }
  // No more will be read. A failed write alone does not say so: a member
  // that answered and closed resets our next write, while its answer still
  // waits to be read.
  bool input_ended() const { return read_error || !protocol_error.empty(); }

  template <class F>
  void with_stream(F&& f) {
    if (secure) f(*secure);
    else f(*plain);
  }

  void cancel_io() {
    dial.cancel();
    if (connected()) {
      error_code ignored;
      tcp_layer().cancel(ignored);
    }
  }

  void throw_if_interrupted(bool sent) {
    if (interrupted) {
      close();
      throw TransportError(Kind::cancelled, sent, false, "cancelled");
    }
  }

  [[noreturn]] void fail(Kind kind, bool sent, const std::string& what, std::optional<GrpcStatus> status = {}) {
    close();
    throw TransportError(kind, sent, false, what, std::move(status));
  }

  // Connected: runs the loop until `ready()`; false at the deadline, with
  // everything left as it is (the pending read goes on).
  template <class Ready>
  bool wait(Ready&& ready, Clock::time_point deadline) {
    ioc.restart();
    while (!ready())
      if (ioc.run_one_until(deadline) == 0 && !ready() && (Clock::now() >= deadline || ioc.stopped())) return false;
    return true;
  }

  void start_read() {
    reading = true;
    with_stream([&](auto& s) {
      s.async_read_some(asio::buffer(input), [this](error_code e, size_t n) {
        reading = false;
        if (e) {
          read_error = e;
          return;
        }
        if (!connected() || !protocol_error.empty()) return;
        try {
          session->receive(input.data(), n);
        } catch (const std::exception& x) {
          protocol_error = x.what();
          return;
        }
        if (n == input.size() && input.size() < kReadSizeMax) input.resize(input.size() * 2);
        flush();
        start_read();
      });
    });
  }

  void flush() {
    if (write_pending || broken() || !connected()) return;
    try {
      session->take_output(output);
    } catch (const std::exception& x) {
      protocol_error = x.what();
      return;
    }
    if (output.empty()) return;
    writing.swap(output);
    output.clear();
    write_pending = true;
    with_stream([&](auto& s) {
      asio::async_write(s, asio::buffer(writing), [this](error_code e, size_t) {
        write_pending = false;
        writing.clear();
        if (e) write_error = e;
        else flush();
      });
    });
  }

  void connect(Clock::time_point deadline) {
    close();
    try {
      tcp::socket socket = dial.connect(deadline, interrupted);
      if (!tls) {
        plain.emplace(std::move(socket));
      } else {
        secure.emplace(std::move(socket), tls->asio());
        dial.handshake(*secure, *tls, deadline, interrupted);
      }
    } catch (const TransportError&) {
      close();
      throw;
    }
    session = std::make_unique<GrpcSession>(tls ? "https" : "http", endpoint.text());
    start_read();
    flush();
  }

  // A kept-alive connection is usable only if what arrived while it was
  // idle leaves it so: the member's SETTINGS or PING are answered and do
  // not, an end of stream (the member closed it, or died) or a GOAWAY (it
  // is going down, or closing idle connections) does. Checked before the
  // request goes out, so such a connection costs no request whose fate is
  // unknown.
  bool stale() {
    ioc.restart();
    ioc.poll();
    return broken() || session->going_away();
  }

  // Sends the request on a live connection (a fresh one when there is
  // none: then `fresh`).
  int32_t start(const GrpcRequest& request, Clock::time_point deadline, Clock::time_point connect_deadline,
                bool& fresh) {
    throw_if_interrupted(false);
    if (connected() && stale()) close();
    fresh = !connected();
    if (fresh) connect(std::min(deadline, connect_deadline));
    int32_t id = 0;
    try {
      id = session->submit(request);
    } catch (const std::exception& e) {
      fail(Kind::lost, false, e.what());
    }
    flush();
    return id;
  }

  // The connection ended (nothing more to read) before the stream did.
  [[noreturn]] void connection_failed(bool fresh) {
    const error_code read = read_error;
    const std::string protocol = protocol_error;
    const bool heard = session && session->heard();
    close();
    if (!protocol.empty()) throw TransportError(Kind::lost, true, false, protocol);
    if (is_alert(read))
      throw TransportError(Kind::tls, false, true,
                           "TLS: the member refused the connection: " + ssl_reason(read) + " (" + tls->cert_note() + ")");
    // An https member closes on a plain request without a byte of answer;
    // so would one that died just then, so this is a hint, not a verdict.
    const bool hint = fresh && !tls && !heard && read == asio::error::eof;
    throw TransportError(Kind::lost, true, false,
                         "reading the answer: " + closed_text(read) +
                             (hint ? " without answering (does it serve https?)" : ""));
  }

  // Waits for `ready` (or the stream's end, or the connection's); the
  // deadline passing first closes the connection and throws.
  template <class Ready>
  GrpcStream& await(int32_t id, Ready&& ready, Clock::time_point deadline, bool fresh) {
    GrpcStream* s = session->stream(id);
    const bool in_time = wait([&] { return ready(*s) || s->ended || s->closed || !s->error.empty() || input_ended(); },
                              deadline);
    throw_if_interrupted(true);
    if (!in_time) fail(Kind::timeout, true, "no answer before the deadline");
    if (!ready(*s)) check_end(*s, fresh);
    return *s;
  }

  // Throws for a stream that broke, was reset, or whose connection broke.
  void check_end(const GrpcStream& s, bool fresh) {
    if (!s.error.empty()) fail(Kind::lost, true, s.error);
    if (s.closed && !s.ended) {
      // The member promises it did not act on a refused stream (and GOAWAY
      // refuses those it will not take): the request can go elsewhere.
      if (s.reset_code == kRefusedStream) fail(Kind::lost, false, "the member refused the stream (it is going away)");
      fail(Kind::lost, true, "the member reset the stream (HTTP/2 error code " + std::to_string(s.reset_code) + ")");
    }
    if (!s.ended && input_ended()) connection_failed(fresh);
  }

  // An answer whose headers say it is not gRPC's; nullopt when it is.
  std::optional<GrpcStatus> refused(const GrpcStream& s) {
    if (s.http_status != 200)
      return GrpcStatus{grpc_code_for_http(s.http_status), "HTTP " + std::to_string(s.http_status)};
    if (s.content_type.rfind("application/grpc", 0) != 0)
      fail(Kind::lost, true, "the answer was not gRPC (content-type '" + s.content_type + "')");
    return std::nullopt;
  }

  // Sends the request and waits until its stream is `ready`. A GOAWAY still
  // on its way when the check before sending looked: the member refuses the
  // stream, unprocessed, and the request goes again once, on a fresh
  // connection.
  template <class Ready>
  std::pair<int32_t, GrpcStream*> send_and_await(const GrpcRequest& request, Clock::time_point deadline,
                                                 Clock::time_point connect_deadline, Ready&& ready) {
    bool fresh = false;
    int32_t id = start(request, deadline, connect_deadline, fresh);
    auto done = [&](const GrpcStream& s) {
      return ready(s) || (!fresh && s.closed && !s.ended && s.reset_code == kRefusedStream);
    };
    GrpcStream* s = &await(id, done, deadline, fresh);
    if (!ready(*s)) {
      close();
      id = start(request, deadline, connect_deadline, fresh);
      s = &await(id, done, deadline, fresh);
    }
    return {id, s};
  }

  GrpcResponse call(const GrpcRequest& request, Clock::time_point deadline, Clock::time_point connect_deadline) {
    auto [id, answer] = send_and_await(request, deadline, connect_deadline,
                                       [](const GrpcStream& s) { return s.ended && s.error.empty(); });
    GrpcStream& s = *answer;
    GrpcResponse out;
    if (auto status = refused(s)) {
      out.status = *status;
    } else if (!s.has_status) {
      fail(Kind::lost, true, "the answer ended without a grpc-status");
    } else {
      out.status = s.status;
      if (s.status.code == 0 && (!s.partial.empty() || s.messages.size() != 1))
        fail(Kind::lost, true,
             s.partial.empty() ? "the answer carried " + std::to_string(s.messages.size()) + " messages, not one"
                               : "the answer ended inside a message");
      if (!s.messages.empty()) out.message = std::move(s.messages.front());
    }
    session->forget(id);
    if (session->going_away()) close();
    return out;
  }

  GrpcResponse open_stream(const GrpcRequest& request, Clock::time_point deadline,
                           Clock::time_point connect_deadline) {
    end_stream();
    auto [id, answer] = send_and_await(request, deadline, connect_deadline,
                                       [](const GrpcStream& s) { return s.headers && s.error.empty(); });
    GrpcStream& s = *answer;
    if (auto status = refused(s)) {
      close();
      return {*status, {}};
    }
    if (s.ended && s.has_status && s.status.code != 0) {
      GrpcResponse out{s.status, {}};
      close();
      return out;
    }
    stream_id = id;
    return {};
  }

  void end_stream() {
    if (!session || stream_id == 0) return;
    session->forget(std::exchange(stream_id, 0));
    flush();
    // The cancel goes out now, not with the next request: until the member
    // reads it, it keeps sending the stream's events.
    ioc.restart();
    ioc.poll();
  }

  bool read_message(std::string& out, Clock::time_point deadline) {
    throw_if_interrupted(true);
    GrpcStream* s = stream_id && session ? session->stream(stream_id) : nullptr;
    if (!s) throw TransportError(Kind::lost, true, false, "no stream open");
    auto ready = [&] { return !s->messages.empty() || s->ended || s->closed || !s->error.empty() || input_ended(); };
    if (!ready()) {
      // A deadline already passed still takes what has arrived (a watch's
      // events read between two waits): run_one_until would not look.
      if (Clock::now() >= deadline) {
        ioc.restart();
        ioc.poll();
      } else {
        wait(ready, deadline);
      }
      throw_if_interrupted(true);
    }
    if (!s->messages.empty()) {
      out += s->messages.front();
      s->messages.pop_front();
      return true;
    }
    if (!ready()) return false;
    check_end(*s, false);
    std::optional<GrpcStatus> status;
    if (s->has_status) status = s->status;
    fail(Kind::lost, true, "the member ended the stream" + status_text(*s), status);
  }

  void close() {
    error_code ignored;
    dial.cancel();
    if (connected()) {
      tcp_layer().shutdown(tcp::socket::shutdown_both, ignored);
      tcp_layer().close(ignored);
    }
    // The pending read and write refer to this object's buffers: let them
    // finish (aborted) before the streams go.
    if (reading || write_pending) {
      ioc.restart();
      while ((reading || write_pending) && ioc.run_one_for(std::chrono::seconds(1)) > 0) {
      }
    }
    reading = write_pending = false;
    secure.reset();
    plain.reset();
    session.reset();
    stream_id = 0;
    read_error = write_error = {};
    protocol_error.clear();
    output.clear();
    writing.clear();
  }
};

GrpcConnection::GrpcConnection(Endpoint endpoint, std::shared_ptr<TlsContext> tls)
    : impl_(std::make_unique<Impl>(std::move(endpoint), std::move(tls))) {}

GrpcConnection::~GrpcConnection() { impl_->close(); }

const Endpoint& GrpcConnection::endpoint() const { return impl_->endpoint; }

namespace {

// What Asio or OpenSSL might still throw (allocation of an SSL object, a
// socket option) becomes a TransportError, so callers see one kind of
// failure. Whether the request went out is unknown then: say it may have.
template <class F>
auto guarded(GrpcConnection& connection, F&& f) {
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

GrpcResponse GrpcConnection::call(const GrpcRequest& request, Clock::time_point deadline,
                                  Clock::time_point connect_deadline) {
  return guarded(*this, [&] { return impl_->call(request, deadline, connect_deadline); });
}

GrpcResponse GrpcConnection::open_stream(const GrpcRequest& request, Clock::time_point deadline,
                                         Clock::time_point connect_deadline) {
  return guarded(*this, [&] { return impl_->open_stream(request, deadline, connect_deadline); });
}

void GrpcConnection::end_stream() {
  guarded(*this, [&] {
    impl_->end_stream();
    return 0;
  });
}

bool GrpcConnection::read_message(std::string& out, Clock::time_point deadline) {
  return guarded(*this, [&] { return impl_->read_message(out, deadline); });
}

void GrpcConnection::interrupt() {
  impl_->interrupted = true;
  asio::post(impl_->ioc, [d = impl_.get()] { d->cancel_io(); });
}

void GrpcConnection::close() { impl_->close(); }

}  // namespace cxxrun::etcd
