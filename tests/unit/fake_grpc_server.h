// A fake gRPC server on loopback (h2c, HTTP/2 with prior knowledge, as
// etcd serves its client port): nghttp2's server session, a thread per
// connection, each call handed to the script (one script call at a time)
// and answered as it says. A stream the script keeps open takes more
// messages from push() and ends with end_streams(). Every wait polls with a
// timeout, so a client bug fails a test instead of hanging it.
#pragma once

#include <arpa/inet.h>
#include <nghttp2/nghttp2.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

class FakeGrpcServer {
 public:
  struct Call {
    std::string method;     // :path, "/etcdserverpb.KV/Range"
    std::string message;    // the request's message, unframed
    std::string token;      // metadata "token"; empty: none
    std::string hasleader;  // metadata "hasleader"
    int connection = 0;     // which connection carried it: 1, 2, ... in the order accepted
  };
  struct Answer {
    int http_status = 200;              // not 200: that status alone, no gRPC
    int code = 0;                       // grpc-status
    std::string message;                // grpc-message, sent percent-encoded
    std::vector<std::string> messages;  // the answer's messages; none (and not kept open): trailers-only
    size_t data_frame = 0;              // the most bytes in one DATA frame; 0: nghttp2's 16 KiB
    bool keep_open = false;             // a stream: send the messages, then wait for push() and end_streams()
    bool close = false;                 // close the connection without an answer
    bool close_after = false;           // send the answer, then close the connection
    uint32_t reset = 0;                 // not 0: RST_STREAM with this HTTP/2 error code instead of an answer
  };
  using Script = std::function<Answer(const Call&)>;

  static Answer ok(std::string message) {
    Answer a;
    a.messages = {std::move(message)};
    return a;
  }
  static Answer error(int code, std::string message) {
    Answer a;
    a.code = code;
    a.message = std::move(message);
    return a;
  }
  static Answer stream(std::vector<std::string> messages = {}) {
    Answer a;
    a.messages = std::move(messages);
    a.keep_open = true;
    return a;
  }

  explicit FakeGrpcServer(Script script) : script_(std::move(script)) {
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(listener_, 8) == 0);
    socklen_t len = sizeof addr;
    getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~FakeGrpcServer() {
    stop_ = true;
    thread_.join();
    for (auto& t : threads_) t.join();
    ::close(listener_);
  }
  FakeGrpcServer(const FakeGrpcServer&) = delete;
  FakeGrpcServer& operator=(const FakeGrpcServer&) = delete;

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  int connections() const { return accepted_; }
  int closed() const { return closed_; }  // as wait_closed() counts
  std::vector<Call> calls() const {
    std::lock_guard lock(calls_mutex_);
    return calls_;
  }
  int count(const std::string& method) const {
    int n = 0;
    for (const auto& c : calls()) n += c.method == method;
    return n;
  }

  // One more message on every stream kept open; how many took it.
  int push(const std::string& message) {
    return each_stream([&](Connection& c, int32_t id, Stream& s) {
      s.pending += frame(message);
      c.resume(id, s);
    });
  }
  // Ends every stream kept open with this status (in trailers); how many.
  int end_streams(int code, const std::string& message = "") {
    return each_stream([&](Connection& c, int32_t id, Stream& s) {
      s.finished = true;
      s.code = code;
      s.status_message = message;
      c.resume(id, s);
    });
  }
  // GOAWAY (no error) on every open connection, which stays open as a
  // member's does while its streams finish; how many.
  int goaway() {
    return each_connection([](Connection& c) {
      nghttp2_submit_goaway(c.session, NGHTTP2_FLAG_NONE, nghttp2_session_get_last_proc_stream_id(c.session),
                            NGHTTP2_NO_ERROR, nullptr, 0);
    });
  }
  // A PING on every open connection, as a member's keepalive sends.
  int ping() {
    return each_connection([](Connection& c) { nghttp2_submit_ping(c.session, NGHTTP2_FLAG_NONE, nullptr); });
  }
  // Closes every open connection (the member restarted, or dropped idle ones).
  int close_connections() { return each_connection([](Connection& c) { c.closing = true; }); }

  // Waits (up to 10 s) until n connections have closed (or, after an
  // answer with close_after, ended our side); false if they did not.
  bool wait_closed(int n) const {
    for (int i = 0; i < 1000 && closed_ < n; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return closed_ >= n;
  }

  static std::string frame(const std::string& message) {
    std::string out(5, '\0');
    for (int i = 0; i < 4; ++i) out[1 + i] = static_cast<char>(message.size() >> (24 - 8 * i));
    return out + message;
  }
  static std::string percent_encode(const std::string& text) {
    std::string out;
    for (unsigned char c : text) {
      if (c < 0x20 || c > 0x7e || c == '%') {
        char escape[4];
        snprintf(escape, sizeof escape, "%%%02X", c);
        out += escape;
      } else {
        out += static_cast<char>(c);
      }
    }
    return out;
  }

 private:
  struct Stream {
    Call call;
    std::string body;     // the request as it came, framed
    std::string pending;  // answer bytes not yet in a DATA frame, from `sent` on
    size_t sent = 0;
    size_t data_frame = 0;
    bool answering = false;  // the answer's headers went; DATA from `pending`
    bool deferred = false;   // nghttp2 waits for resume()
    bool finished = false;   // after `pending`, the trailers
    int code = 0;
    std::string status_message;
  };

  struct Connection {
    int fd = -1;
    int id = 0;
    nghttp2_session* session = nullptr;
    std::mutex mutex;  // everything here: the connection's thread, push() and the rest
    std::map<int32_t, Stream> streams;
    std::vector<int32_t> complete;  // requests read whole, not yet answered
    std::string out;
    bool closing = false, close_when_sent = false, done = false;
    bool counted = false;  // in closed_ already: done sending, lingering

    void resume(int32_t id, Stream& s) {
      if (s.deferred) {
        s.deferred = false;
        nghttp2_session_resume_data(session, id);
      }
    }
    // Sends what the session has, as far as the socket takes it now.
    bool flush() {
      while (true) {
        while (out.size() < (1 << 20)) {
          const uint8_t* bytes = nullptr;
          ssize_t n = nghttp2_session_mem_send(session, &bytes);
          if (n < 0) return false;
          if (n == 0) break;
          out.append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(n));
        }
        if (out.empty()) return true;
        ssize_t n = ::send(fd, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
        out.erase(0, static_cast<size_t>(n));
        if (!out.empty()) return true;
      }
    }
  };

  static nghttp2_nv nv(const char* name, const std::string& value) {
    return {reinterpret_cast<uint8_t*>(const_cast<char*>(name)),
            reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), strlen(name), value.size(),
            NGHTTP2_NV_FLAG_NONE};
  }

  static void submit_status(nghttp2_session* session, int32_t id, int code, const std::string& message,
                            bool trailers_only) {
    const std::string status = "200", type = "application/grpc", text = std::to_string(code),
                      encoded = percent_encode(message);
    std::vector<nghttp2_nv> headers;
    if (trailers_only) headers = {nv(":status", status), nv("content-type", type)};
    headers.push_back(nv("grpc-status", text));
    if (!message.empty()) headers.push_back(nv("grpc-message", encoded));
    if (trailers_only) nghttp2_submit_response(session, id, headers.data(), headers.size(), nullptr);
    else nghttp2_submit_trailer(session, id, headers.data(), headers.size());
  }

  static ssize_t read_answer(nghttp2_session* session, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                             nghttp2_data_source*, void* user) {
    auto& c = *static_cast<Connection*>(user);
    auto it = c.streams.find(id);
    if (it == c.streams.end()) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    Stream& s = it->second;
    size_t n = std::min(length, s.pending.size() - s.sent);
    if (s.data_frame) n = std::min(n, s.data_frame);
    if (n == 0) {
      if (!s.finished) {
        s.deferred = true;
        return NGHTTP2_ERR_DEFERRED;
      }
      *flags |= NGHTTP2_DATA_FLAG_EOF | NGHTTP2_DATA_FLAG_NO_END_STREAM;
      submit_status(session, id, s.code, s.status_message, false);
      return 0;
    }
    memcpy(buf, s.pending.data() + s.sent, n);
    s.sent += n;
    if (s.sent == s.pending.size()) {
      s.pending.clear();
      s.sent = 0;
    }
    return static_cast<ssize_t>(n);
  }

  void answer(Connection& c, int32_t id, Stream& s, const Answer& a) {
    if (a.close) {
      c.closing = true;
      return;
    }
    c.close_when_sent = a.close_after;
    if (a.reset) {
      nghttp2_submit_rst_stream(c.session, NGHTTP2_FLAG_NONE, id, a.reset);
      return;
    }
    if (a.http_status != 200) {
      const std::string status = std::to_string(a.http_status);
      nghttp2_nv headers[] = {nv(":status", status)};
      nghttp2_submit_response(c.session, id, headers, 1, nullptr);
      return;
    }
    if (a.messages.empty() && !a.keep_open) {
      submit_status(c.session, id, a.code, a.message, true);
      return;
    }
    for (const auto& m : a.messages) s.pending += frame(m);
    s.data_frame = a.data_frame;
    s.finished = !a.keep_open;
    s.code = a.code;
    s.status_message = a.message;
    s.answering = true;
    const std::string status = "200", type = "application/grpc";
    nghttp2_nv headers[] = {nv(":status", status), nv("content-type", type)};
    nghttp2_data_provider provider{};
    provider.read_callback = read_answer;
    nghttp2_submit_response(c.session, id, headers, 2, &provider);
  }

  static nghttp2_session* make_session(Connection* c) {
    nghttp2_session_callbacks* cb = nullptr;
    nghttp2_session_callbacks_new(&cb);
    nghttp2_session_callbacks_set_on_begin_headers_callback(
        cb, [](nghttp2_session*, const nghttp2_frame* f, void* u) {
          if (f->hd.type == NGHTTP2_HEADERS && f->headers.cat == NGHTTP2_HCAT_REQUEST)
            static_cast<Connection*>(u)->streams[f->hd.stream_id].call.connection = static_cast<Connection*>(u)->id;
          return 0;
        });
    nghttp2_session_callbacks_set_on_header_callback(
        cb, [](nghttp2_session*, const nghttp2_frame* f, const uint8_t* name, size_t namelen, const uint8_t* value,
               size_t valuelen, uint8_t, void* u) {
          auto& streams = static_cast<Connection*>(u)->streams;
          auto it = streams.find(f->hd.stream_id);
          if (it == streams.end()) return 0;
          const std::string n(reinterpret_cast<const char*>(name), namelen);
          const std::string v(reinterpret_cast<const char*>(value), valuelen);
          if (n == ":path") it->second.call.method = v;
          if (n == "token") it->second.call.token = v;
          if (n == "hasleader") it->second.call.hasleader = v;
          return 0;
        });
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(
        cb, [](nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* u) {
          auto& streams = static_cast<Connection*>(u)->streams;
          if (auto it = streams.find(id); it != streams.end())
            it->second.body.append(reinterpret_cast<const char*>(data), len);
          return 0;
        });
    nghttp2_session_callbacks_set_on_frame_recv_callback(cb, [](nghttp2_session*, const nghttp2_frame* f, void* u) {
      auto& c = *static_cast<Connection*>(u);
      if ((f->hd.type == NGHTTP2_HEADERS || f->hd.type == NGHTTP2_DATA) && (f->hd.flags & NGHTTP2_FLAG_END_STREAM) &&
          c.streams.count(f->hd.stream_id))
        c.complete.push_back(f->hd.stream_id);
      return 0;
    });
    nghttp2_session_callbacks_set_on_stream_close_callback(cb, [](nghttp2_session*, int32_t id, uint32_t, void* u) {
      static_cast<Connection*>(u)->streams.erase(id);
      return 0;
    });
    nghttp2_session* session = nullptr;
    nghttp2_session_server_new(&session, cb, c);
    nghttp2_session_callbacks_del(cb);
    nghttp2_submit_settings(session, NGHTTP2_FLAG_NONE, nullptr, 0);
    return session;
  }

  template <class F>
  int each_connection(F&& f) {
    std::lock_guard lock(mutex_);
    int n = 0;
    for (auto& c : connections_) {
      std::lock_guard clock(c->mutex);
      if (c->done || c->closing) continue;
      f(*c);
      c->flush();
      ++n;
    }
    return n;
  }

  template <class F>
  int each_stream(F&& f) {
    std::lock_guard lock(mutex_);
    int n = 0;
    for (auto& c : connections_) {
      std::lock_guard clock(c->mutex);
      if (c->done || c->closing) continue;
      // Sending may close (and forget) a stream: first pick, then act.
      std::vector<int32_t> open;
      for (auto& [id, s] : c->streams)
        if (s.answering && !s.finished) open.push_back(id);
      for (int32_t id : open) f(*c, id, c->streams.at(id));
      n += static_cast<int>(open.size());
      c->flush();
    }
    return n;
  }

  void serve() {
    while (!stop_) {
      pollfd p{listener_, POLLIN, 0};
      if (poll(&p, 1, 20) <= 0) continue;
      int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) continue;
      auto c = std::make_shared<Connection>();
      c->fd = fd;
      c->id = ++accepted_;
      c->session = make_session(c.get());
      {
        std::lock_guard lock(mutex_);
        connections_.push_back(c);
      }
      threads_.emplace_back([this, c] {
        serve_connection(*c);
        std::lock_guard lock(c->mutex);
        c->done = true;
        nghttp2_session_del(c->session);
        ::close(c->fd);
        if (!c->counted) ++closed_;
      });
    }
  }

  void serve_connection(Connection& c) {
    char buf[65536];
    std::unique_lock lock(c.mutex);
    if (!c.flush()) return;
    while (!stop_ && !c.closing) {
      pollfd p{c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0};
      lock.unlock();
      poll(&p, 1, 10);
      lock.lock();
      if (c.closing) return;
      if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
        ssize_t n = ::recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return;
        if (n > 0 && nghttp2_session_mem_recv(c.session, reinterpret_cast<uint8_t*>(buf), static_cast<size_t>(n)) < 0)
          return;
      }
      while (!c.complete.empty()) {
        const int32_t id = c.complete.front();
        c.complete.erase(c.complete.begin());
        auto it = c.streams.find(id);
        if (it == c.streams.end()) continue;
        Stream& s = it->second;
        if (s.body.size() >= 5) s.call.message = s.body.substr(5);
        const Call call = s.call;
        {
          std::lock_guard calls_lock(calls_mutex_);
          calls_.push_back(call);
        }
        lock.unlock();
        Answer a;
        {
          std::lock_guard script_lock(script_mutex_);
          a = script_(call);
        }
        lock.lock();
        auto again = c.streams.find(id);
        if (again == c.streams.end()) continue;
        answer(c, id, again->second, a);
        if (c.closing) return;
      }
      if (!c.flush()) return;
      if (c.close_when_sent && c.out.empty() && !nghttp2_session_want_write(c.session)) {
        c.counted = c.closing = true;
        lock.unlock();
        linger(c.fd);
        lock.lock();
        return;
      }
    }
  }

  // Closes as a server that means its answer to arrive: our side first, then
  // what the client still sends is read until it closes too (up to 10 s). A
  // plain close with the client's bytes unread resets the connection, and
  // the answer still in the send buffer is lost with it.
  void linger(int fd) {
    shutdown(fd, SHUT_WR);
    ++closed_;
    char buf[4096];
    for (int i = 0; i < 1000; ++i) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 10) <= 0) continue;
      ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) return;
    }
  }

  Script script_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0}, closed_{0};
  // Taken in this order: mutex_ (connections_) before a Connection's;
  // calls_mutex_ and script_mutex_ alone.
  std::mutex mutex_;
  mutable std::mutex calls_mutex_;
  std::mutex script_mutex_;
  std::vector<Call> calls_;
  std::vector<std::shared_ptr<Connection>> connections_;
  std::vector<std::thread> threads_;
  std::thread thread_;
};
