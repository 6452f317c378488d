#include "store/server.h"

#include <array>
#include <climits>
#include <system_error>
#include <unordered_map>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "store/endpoint.h"
#include "store/listener.h"
#include "store/request.h"
#include "store/state.h"
#include "store/wire.h"

namespace cxxrun::store {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

// A connection whose unsent replies pass this stops being read (its pipelined
// requests wait) until the client drains them.
constexpr size_t kPauseOutputBytes = 1 << 20;
// Output that never drains (a watcher that stopped reading) closes it.
constexpr size_t kMaxOutputBytes = 2 * wire::kMaxRequestBytes;
constexpr size_t kReadChunk = 64 * 1024;
// Each connection's own read buffer: a SET of a short key and value, or a
// few pipelined requests; more is read through the shared kReadChunk.
constexpr size_t kFirstRead = 512;
// The kernel clamps this to net.core.somaxconn: "as many as the host allows".
constexpr int kBacklog = INT_MAX;

class Connection;

}  // namespace

struct StoreServer::Impl : std::enable_shared_from_this<Impl> {
  explicit Impl(asio::io_context& io) : listener(io, "store") {}

  void adopt(tcp::socket socket);
  void deliver(StoreState::Outcome& outcome);
  void forget(StoreState::ClientId id);
  void close();

  AcceptLoop listener;
  bool closed = false;
  StoreState state;
  std::unordered_map<StoreState::ClientId, std::shared_ptr<Connection>> connections;
  StoreState::ClientId next_id = 1;
  // Every connection reads through this one buffer: the loop is
  // single-threaded, and an idle connection then holds no read buffer at all.
  std::array<char, kReadChunk> scratch;
};

namespace {

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(std::shared_ptr<StoreServer::Impl> server, tcp::socket socket, StoreState::ClientId id,
             std::string peer)
      : server_(std::move(server)), socket_(std::move(socket)), id_(id), peer_(std::move(peer)) {}

  void start() { arm_read(); }

  void send(std::string bytes) {
    if (closed_) return;
    if (out_.empty())
      out_ = std::move(bytes);
    else
      out_ += bytes;
    if (out_.size() + writing_.size() > kMaxOutputBytes) {
      fail(fmt::format("{} bytes of replies unread", out_.size() + writing_.size()));
      return;
    }
    // Replies to this connection's own requests wait for the end of the
    // read that brought them: one send for a pipelined batch.
    if (!write_active_ && !processing_) write();
  }

  // A request the connection cannot survive: one line, then close.
  void fail(const std::string& why) {
    if (closed_) return;
    spdlog::warn("store: closing connection from {}: {}", peer_, why);
    close();
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    error_code ignored;
    socket_.shutdown(tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
    server_->forget(id_);
  }

 private:
  bool paused() const { return out_.size() + writing_.size() > kPauseOutputBytes; }

  // Reads into a small buffer of the connection's own (an idle connection
  // costs its socket and these 512 bytes), which holds a whole typical
  // request; a read that fills it takes one more chunk through the server's
  // shared scratch buffer. A read, unlike a readiness wait, lets Asio keep
  // the socket's epoll registration as it is: no epoll_ctl per request.
  void arm_read() {
    if (closed_ || read_armed_ || paused()) return;
    read_armed_ = true;
    socket_.async_read_some(asio::buffer(first_),
                            [self = shared_from_this()](const error_code& ec, size_t n) { self->on_read(ec, n); });
  }

  void on_read(error_code ec, size_t n) {
    read_armed_ = false;
    if (closed_ || ec == asio::error::operation_aborted) return;
    if (!ec) in_.append(first_.data(), n);
    if (!ec && n == first_.size()) {
      // One chunk more per turn, so a flood of pipelined requests is read no
      // faster than it is answered (the output pause applies between turns).
      size_t more = socket_.read_some(asio::buffer(server_->scratch), ec);
      if (!ec) in_.append(server_->scratch.data(), more);
    }
    if (ec == asio::error::would_block || ec == asio::error::try_again) ec = {};
    if (ec) {
      spdlog::debug("store: connection from {} ended: {}", peer_, ec.message());
      return close();
    }
    process_and_flush();
    // Asio tries a new read at once, before asking epoll; right after our
    // reply the client cannot have answered yet, so that recv would fail.
    // Re-arming behind the handlers already queued (the rest of this epoll
    // batch) gives the client that time: the try then mostly finds the next
    // request (recv per reply 2.0 -> ~1.03 under bench/store.sh's load).
    asio::post(socket_.get_executor(), [self = shared_from_this()] { self->arm_read(); });
  }

  void process_and_flush() {
    processing_ = true;
    process();
    processing_ = false;
    if (!closed_ && !write_active_ && !out_.empty()) write();
  }

  // Answers every complete request buffered, up to the output pause.
  void process() {
    size_t start = 0;
    try {
      while (!closed_ && !paused() && in_.size() - start >= needed_) {
        RequestParse parsed = parse_request(std::string_view(in_).substr(start), table_);
        if (parsed.table != table_)
          spdlog::debug("store: connection from {} speaks the {} protocol", peer_,
                        parsed.table == OpTable::modern ? "modern" : "legacy");
        table_ = parsed.table;
        if (parsed.status == RequestParse::Status::error) return fail(parsed.error);
        if (parsed.status == RequestParse::Status::need_more) {
          needed_ = parsed.needed;
          break;
        }
        start += parsed.consumed;
        needed_ = 1;
        StoreState::Outcome outcome = server_->state.apply(id_, table_, parsed.request);
        server_->deliver(outcome);
        if (outcome.close) return fail(outcome.error);
      }
    } catch (const std::exception& e) {
      // bad_alloc on a large request, most likely: this connection only.
      return fail(e.what());
    }
    in_.erase(0, start);
    if (in_.empty() && in_.capacity() > kReadChunk) std::string().swap(in_);
  }

  void write() {
    // The socket is non-blocking: most replies fit its buffer and go now,
    // without a completion handler or an EPOLLOUT registration; only what
    // does not fit waits for writability.
    error_code ec;
    size_t n = socket_.write_some(asio::buffer(out_), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      n = 0;
    } else if (ec) {
      spdlog::debug("store: connection from {} ended while writing: {}", peer_, ec.message());
      return close();
    }
    out_.erase(0, n);
    if (out_.empty()) return;
    write_active_ = true;
    writing_.swap(out_);
    asio::async_write(socket_, asio::buffer(writing_),
                      [self = shared_from_this()](const error_code& ec, size_t) { self->on_written(ec); });
  }

  void on_written(const error_code& ec) {
    write_active_ = false;
    if (closed_ || ec == asio::error::operation_aborted) return;
    if (ec) {
      spdlog::debug("store: connection from {} ended while writing: {}", peer_, ec.message());
      return close();
    }
    if (writing_.capacity() > kPauseOutputBytes)
      std::string().swap(writing_);
    else
      writing_.clear();
    if (!out_.empty()) write();
    if (!paused()) {
      process_and_flush();
      arm_read();
    }
  }

  std::shared_ptr<StoreServer::Impl> server_;
  tcp::socket socket_;
  StoreState::ClientId id_;
  std::string peer_;
  OpTable table_ = OpTable::unknown;
  std::string in_;
  size_t needed_ = 1;
  std::string out_;
  std::string writing_;
  std::array<char, kFirstRead> first_;
  bool read_armed_ = false;
  bool write_active_ = false;
  bool processing_ = false;
  bool closed_ = false;
};

void bind_and_listen(tcp::acceptor& acceptor, const StoreServerOptions& options) {
  if (options.port < 0 || options.port > 65535)
    throw std::system_error(std::make_error_code(std::errc::invalid_argument),
                            "store port " + std::to_string(options.port) + " is out of range");
  std::vector<tcp::endpoint> candidates;
  if (options.host.empty()) {
    candidates = wildcard_endpoints(options.port);
  } else {
    tcp::resolver resolver(acceptor.get_executor());
    error_code ec;
    auto results = resolver.resolve(options.host, std::to_string(options.port),
                                    tcp::resolver::numeric_service | tcp::resolver::passive, ec);
    if (ec)
      throw std::system_error(ec, "cannot resolve store host '" + options.host + "'");
    for (const auto& entry : results) candidates.push_back(entry.endpoint());
  }
  if (error_code ec = listen_on_first(acceptor, candidates, kBacklog)) {
    std::string shown = options.host.empty() ? "::" : options.host;
    throw std::system_error(ec, "cannot listen on " + format_endpoint({shown, options.port}));
  }
}

}  // namespace

void StoreServer::Impl::adopt(tcp::socket socket) {
  error_code ec;
  tcp::endpoint remote = socket.remote_endpoint(ec);
  if (ec) return;  // already gone
  socket.set_option(tcp::no_delay(true), ec);
  socket.non_blocking(true, ec);
  StoreState::ClientId id = next_id++;
  auto connection =
      std::make_shared<Connection>(shared_from_this(), std::move(socket), id, endpoint_text(remote));
  connections.emplace(id, connection);
  spdlog::debug("store: connection from {} ({} open)", endpoint_text(remote), connections.size());
  connection->start();
}

void StoreServer::Impl::deliver(StoreState::Outcome& outcome) {
  for (StoreState::Delivery& delivery : outcome.deliveries) {
    auto it = connections.find(delivery.client);
    if (it == connections.end()) continue;
    std::shared_ptr<Connection> keep = it->second;  // send() may close and forget it
    keep->send(std::move(delivery.bytes));
  }
}

void StoreServer::Impl::forget(StoreState::ClientId id) {
  state.disconnect(id);
  connections.erase(id);
}

void StoreServer::Impl::close() {
  if (closed) return;
  closed = true;
  listener.close();
  auto all = std::move(connections);
  connections.clear();
  for (auto& [id, connection] : all) connection->close();
}

StoreServer::StoreServer(asio::io_context& io, const StoreServerOptions& options)
    : impl_(std::make_shared<Impl>(io)) {
  bind_and_listen(impl_->listener.acceptor(), options);
  tcp::endpoint local = impl_->listener.acceptor().local_endpoint();
  port_ = local.port();
  address_ = endpoint_text(local);
  spdlog::debug("store: listening on {}", address_);
  Impl* impl = impl_.get();
  impl_->listener.start(impl_, [impl](tcp::socket socket) { impl->adopt(std::move(socket)); });
}

StoreServer::~StoreServer() { close(); }

int StoreServer::port() const { return port_; }
std::string StoreServer::address() const { return address_; }
void StoreServer::close() { impl_->close(); }

}  // namespace cxxrun::store
