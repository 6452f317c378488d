#include "store/server_connection.h"

#include <algorithm>
#include <bit>
#include <string_view>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "store/auth.h"
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
// A buffer larger than this is given back once it is empty; smaller ones are
// kept, so a busy connection does not allocate per request.
constexpr size_t kKeepBufferBytes = kServerReadChunk;

// What a string holds on the heap: nothing while it fits in the string itself.
// Computed once at start-up (clang cannot evaluate it at compile time), so
// no per-call guard.
const size_t kInlineCapacity = std::string().capacity();
size_t heap_bytes(const std::string& s) { return s.capacity() > kInlineCapacity ? s.capacity() : 0; }

}  // namespace

ServerConnection::ServerConnection(std::shared_ptr<ServerImpl> server, tcp::socket socket,
                                   StoreState::ClientId id, std::string peer)
    : server_(std::move(server)),
      socket_(std::move(socket)),
      auth_timer_(socket_.get_executor()),
      id_(id),
      peer_(std::move(peer)),
      gate_(server_->token) {}

void ServerConnection::start() {
  arm_read();
  if (authenticated()) return;
  auth_timer_.expires_after(server_->auth_deadline);
  auth_timer_.async_wait([self = shared_from_this()](const error_code& ec) {
    if (ec || self->closed_ || self->authenticated()) return;
    self->server_->log_refusal(fmt::format("closing connection from {}: no token handshake within {} ms", self->peer_,
                                           self->server_->auth_deadline.count()));
    self->close();
  });
}

void ServerConnection::send(std::string bytes) {
  if (closed_) return;
  // A queued reply counts against the budget before it is queued: the room
  // for the buffer it is about to need (libstdc++ grows a string to at least
  // twice its capacity), or the reply's own buffer, which becomes out_.
  const size_t want = out_.size() + bytes.size();
  size_t grows = 0;
  if (out_.empty())
    grows = heap_bytes(bytes);
  else if (want > out_.capacity())
    grows = std::max(want, 2 * out_.capacity());
  if (grows > 0 && !server_->make_room(*this, grows)) return;
  if (out_.empty())
    out_ = std::move(bytes);
  else
    out_ += bytes;
  // Otherwise the bytes went into the buffer out_ already had.
  if (grows > 0) account();
  if (out_.size() + writing_.size() > kMaxOutputBytes) {
    fail(fmt::format("{} bytes of replies unread exceed the limit of {} bytes per connection",
                     out_.size() + writing_.size(), kMaxOutputBytes));
    return;
  }
  // Replies to this connection's own requests wait for the end of the
  // read that brought them: one send for a pipelined batch.
  if (!write_active_ && !processing_) write();
}

void ServerConnection::fail(const std::string& why) {
  if (closed_) return;
  spdlog::warn("store: closing connection from {}: {}", peer_, why);
  close();
}

void ServerConnection::close() {
  if (closed_) return;
  closed_ = true;
  error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  auth_timer_.cancel();
  // Its memory goes back now, not when the last pending handler lets go of
  // it. writing_ stays until then: a cancelled write may still name it.
  std::vector<char>().swap(in_);
  std::string().swap(out_);
  server_->held_changed(held_, 0);
  held_ = 0;
  server_->forget(id_);
}

bool ServerConnection::paused() const { return out_.size() + writing_.size() > kPauseOutputBytes; }

// Reads into a small buffer of the connection's own (an idle connection
// costs its socket and these 512 bytes), which holds a whole typical
// request; a read that fills it takes one more chunk through the server's
// shared scratch buffer. A read, unlike a readiness wait, lets Asio keep
// the socket's epoll registration as it is: no epoll_ctl per request.
void ServerConnection::arm_read() {
  if (closed_ || read_armed_ || paused()) return;
  read_armed_ = true;
  socket_.async_read_some(asio::buffer(first_),
                          [self = shared_from_this()](const error_code& ec, size_t n) { self->on_read(ec, n); });
}

void ServerConnection::on_read(error_code ec, size_t n) {
  read_armed_ = false;
  if (closed_ || ec == asio::error::operation_aborted) return;
  size_t more = 0;
  if (!ec && n == first_.size()) {
    // One chunk more per turn, so a flood of pipelined requests is read no
    // faster than it is answered (the output pause applies between turns).
    more = socket_.read_some(asio::buffer(server_->scratch), ec);
  }
  if (ec == asio::error::would_block || ec == asio::error::try_again) ec = {};
  if (ec) {
    spdlog::debug("store: connection from {} ended: {}", peer_, ec.message());
    return close();
  }
  last_input_ = std::chrono::steady_clock::now();
  if (!reserve_input(n + more)) return;
  in_.insert(in_.end(), first_.data(), first_.data() + n);
  in_.insert(in_.end(), server_->scratch.data(), server_->scratch.data() + more);
  process_and_flush();
  account();
  // Asio tries a new read at once, before asking epoll; right after our
  // reply the client cannot have answered yet, so that recv would fail.
  // Re-arming behind the handlers already queued (the rest of this epoll
  // batch) gives the client that time: the try then mostly finds the next
  // request (recv per reply 2.0 -> ~1.03 under bench/store.sh's load).
  asio::post(socket_.get_executor(), [self = shared_from_this()] { self->arm_read(); });
}

// Room in in_ for `extra` more bytes, charged to the budget before it is
// allocated. The buffer doubles, so a large request costs linear copying,
// but never past the end of the field the parser is waiting for (needed_):
// what a client merely announces reserves nothing, and a buffer is at most
// twice what has arrived.
bool ServerConnection::reserve_input(size_t extra) {
  const size_t want = in_.size() + extra;
  if (want <= in_.capacity()) return true;
  size_t grown = std::bit_ceil(want);
  if (needed_ >= want) grown = std::min(grown, needed_);
  if (!server_->make_room(*this, grown)) return false;
  in_.reserve(grown);
  account();
  return true;
}

void ServerConnection::process_and_flush() {
  processing_ = true;
  process();
  processing_ = false;
  if (!closed_ && !write_active_ && !out_.empty()) write();
}

// Answers every complete request buffered, up to the output pause, once the
// token handshake (if the server has a token) is through.
void ServerConnection::process() {
  size_t start = 0;
  try {
    if (gate_.open() || pass_gate(start)) answer_requests(start);
  } catch (const std::exception& e) {
    // bad_alloc on a large request, most likely: this connection only.
    return fail(fmt::format("cannot handle a request: {}", e.what()));
  }
  if (closed_ || start == 0) return;
  in_.erase(in_.begin(), in_.begin() + static_cast<std::ptrdiff_t>(start));
  // A large request's buffer goes once it is answered; the start of the next
  // request, if any, moves to one of its own size.
  if (in_.capacity() > kKeepBufferBytes && in_.size() < in_.capacity() / 4) {
    if (in_.empty())
      std::vector<char>().swap(in_);
    else
      in_.shrink_to_fit();
  }
}

// The handshake over what is buffered from `start`; true once it is through.
// Nothing of an unauthenticated connection reaches the parser or the state.
bool ServerConnection::pass_gate(size_t& start) {
  while (!closed_ && !gate_.open()) {
    if (in_.size() - start < needed_) return false;
    AuthGate::Step step = gate_.step(std::string_view(in_.data() + start, in_.size() - start), auth::make_nonce);
    switch (step.status) {
      case AuthGate::Status::need_more:
        needed_ = step.needed;
        return false;
      case AuthGate::Status::refuse:
        refuse(std::move(step.reply), step.error);
        return false;
      case AuthGate::Status::reply:
        send(std::move(step.reply));
        break;
      case AuthGate::Status::open:
        break;
    }
    start += step.consumed;
    needed_ = 1;
  }
  return !closed_;
}

void ServerConnection::answer_requests(size_t& start) {
  while (!closed_ && !paused() && in_.size() - start >= needed_) {
    RequestParse parsed =
        parse_request(std::string_view(in_.data() + start, in_.size() - start), table_, server_->limits);
    if (parsed.table != table_)
      spdlog::debug("store: connection from {} speaks the {} protocol", peer_,
                    parsed.table == OpTable::modern ? "modern" : "legacy");
    table_ = parsed.table;
    if (parsed.status == RequestParse::Status::error) return fail(parsed.error);
    if (parsed.status == RequestParse::Status::need_more) {
      needed_ = parsed.needed;
      return;
    }
    start += parsed.consumed;
    needed_ = 1;
    StoreState::Outcome outcome = server_->state.apply(id_, table_, parsed.request);
    // May close this connection too (the budget), which ends the loop.
    server_->deliver(outcome);
    if (outcome.close) return fail(outcome.error);
  }
}

// A refused handshake: its answer, if any (AUTH_REFUSED), goes out before the
// close, so the client can say why instead of seeing a dropped connection.
void ServerConnection::refuse(std::string reply, const std::string& why) {
  if (!reply.empty() && !write_active_) {
    out_ += reply;
    boost::system::error_code ignored;
    socket_.write_some(asio::buffer(out_), ignored);
  }
  if (closed_) return;
  server_->log_refusal("closing connection from " + peer_ + ": " + why);
  close();
}

void ServerConnection::write() {
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

void ServerConnection::on_written(const error_code& ec) {
  write_active_ = false;
  if (closed_ || ec == asio::error::operation_aborted) return;
  if (ec) {
    spdlog::debug("store: connection from {} ended while writing: {}", peer_, ec.message());
    return close();
  }
  if (writing_.capacity() > kKeepBufferBytes)
    std::string().swap(writing_);
  else
    writing_.clear();
  account();
  if (!out_.empty()) write();
  if (!paused()) {
    process_and_flush();
    arm_read();
  }
  account();
}

// The budget's view of this connection: every byte its buffers hold.
void ServerConnection::account() {
  if (closed_) return;
  const size_t now = in_.capacity() + heap_bytes(out_) + heap_bytes(writing_);
  server_->held_changed(held_, now);
  held_ = now;
}

}  // namespace cxxrun::store
