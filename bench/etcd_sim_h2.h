// gRPC over HTTP/2 for bench/etcd_sim.cc's connections, as etcd/ speaks it
// (docs/etcd-client.md): h2c with prior knowledge, one stream per call, one
// message sent with END_STREAM, the answer's messages and its grpc-status.
// nghttp2 frames the bytes; the connection's socket and epoll stay the
// loop's (etcd_sim_loop.h), which hands this what it read and sends what
// this produced.
#pragma once

#include <nghttp2/nghttp2.h>

#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace etcd_sim {

// One HTTP/2 session: its calls go one at a time (a unary connection) or
// one for the connection's life (a watch).
class H2Session {
 public:
  // Each whole gRPC message of the current call, as it arrives.
  std::function<void(std::string_view)> on_message;
  // The current call ended: gRPC's status (HTTP status mapped when not 200)
  // and grpc-message.
  std::function<void(int code, const std::string& message)> on_end;

  H2Session() {
    nghttp2_session_callbacks* cbs = nullptr;
    nghttp2_session_callbacks_new(&cbs);
    nghttp2_session_callbacks_set_on_header_callback(cbs, &H2Session::header_cb);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs, &H2Session::data_cb);
    nghttp2_session_callbacks_set_on_stream_close_callback(cbs, &H2Session::close_cb);
    nghttp2_session_client_new(&session_, cbs, this);
    nghttp2_session_callbacks_del(cbs);
    // A page of 2,048 descriptors is over a megabyte: the default 64 KiB
    // windows would make it many round trips.
    const nghttp2_settings_entry settings[] = {{NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
                                               {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, 16 << 20}};
    nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, 2);
    nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, 64 << 20);
  }
  ~H2Session() { nghttp2_session_del(session_); }
  H2Session(const H2Session&) = delete;
  H2Session& operator=(const H2Session&) = delete;

  // Starts a call of `method` with one message.
  void call(const std::string& authority, const std::string& method, const std::string& message) {
    body_.assign(5, '\0');
    const uint32_t n = static_cast<uint32_t>(message.size());
    body_[1] = char(n >> 24), body_[2] = char(n >> 16), body_[3] = char(n >> 8), body_[4] = char(n);
    body_ += message;
    sent_ = 0;
    status_ = 0, grpc_code_ = -1;
    grpc_message_.clear(), frames_.clear();
    auto nv = [](const char* name, const std::string& value) {
      return nghttp2_nv{(uint8_t*)name, (uint8_t*)value.data(), strlen(name), value.size(), NGHTTP2_NV_FLAG_NONE};
    };
    static const std::string post = "POST", http = "http", grpc = "application/grpc", trailers = "trailers",
                             agent = "etcd_sim", yes = "true";
    const nghttp2_nv headers[] = {nv(":method", post),          nv(":scheme", http),   nv(":path", method),
                                  nv(":authority", authority),  nv("content-type", grpc), nv("te", trailers),
                                  nv("user-agent", agent),      nv("hasleader", yes)};
    nghttp2_data_provider data{};
    data.read_callback = &H2Session::read_cb;
    stream_ = nghttp2_submit_request(session_, nullptr, headers, std::size(headers), &data, nullptr);
  }

  // Ends the current call (RST_STREAM CANCEL), keeping the session for the
  // next: what is still in flight for it is dropped.
  void cancel() {
    if (stream_ >= 0) nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream_, NGHTTP2_CANCEL);
    stream_ = -1;
  }

  // Bytes that arrived; false (with `error`) when they are not HTTP/2.
  bool received(const std::string& in, std::string& error) {
    const ssize_t n = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(in.data()), in.size());
    if (n < 0) return error = std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(n)), false;
    return true;
  }

  // What is to go out (requests, acknowledgements, window updates).
  void pending(std::string& out) {
    for (;;) {
      const uint8_t* data = nullptr;
      const ssize_t n = nghttp2_session_mem_send(session_, &data);
      if (n <= 0) return;
      out.append(reinterpret_cast<const char*>(data), static_cast<size_t>(n));
    }
  }

  // The member said GOAWAY, or the session failed: a new connection is needed.
  bool dead() const { return !nghttp2_session_want_read(session_) && !nghttp2_session_want_write(session_); }

 private:
  static ssize_t read_cb(nghttp2_session*, int32_t, uint8_t* buf, size_t length, uint32_t* flags,
                         nghttp2_data_source*, void* user) {
    auto* self = static_cast<H2Session*>(user);
    const size_t n = std::min(length, self->body_.size() - self->sent_);
    memcpy(buf, self->body_.data() + self->sent_, n);
    self->sent_ += n;
    if (self->sent_ == self->body_.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
    return static_cast<ssize_t>(n);
  }

  static int header_cb(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    auto* self = static_cast<H2Session*>(user);
    if (frame->hd.stream_id != self->stream_) return 0;
    const std::string_view n(reinterpret_cast<const char*>(name), namelen);
    const std::string v(reinterpret_cast<const char*>(value), valuelen);
    if (n == ":status") self->status_ = atoi(v.c_str());
    else if (n == "grpc-status") self->grpc_code_ = atoi(v.c_str());
    else if (n == "grpc-message") self->grpc_message_ = v;
    return 0;
  }

  static int data_cb(nghttp2_session*, uint8_t, int32_t stream, const uint8_t* data, size_t len, void* user) {
    auto* self = static_cast<H2Session*>(user);
    if (stream != self->stream_) return 0;
    self->frames_.append(reinterpret_cast<const char*>(data), len);
    while (self->frames_.size() >= 5) {
      const auto* p = reinterpret_cast<const uint8_t*>(self->frames_.data());
      const size_t size = (size_t(p[1]) << 24) | (size_t(p[2]) << 16) | (size_t(p[3]) << 8) | p[4];
      if (self->frames_.size() < 5 + size) break;
      if (self->on_message) self->on_message(std::string_view(self->frames_).substr(5, size));
      self->frames_.erase(0, 5 + size);
    }
    return 0;
  }

  static int close_cb(nghttp2_session*, int32_t stream, uint32_t error, void* user) {
    auto* self = static_cast<H2Session*>(user);
    if (stream != self->stream_) return 0;
    self->stream_ = -1;
    int code = self->grpc_code_;
    std::string message = self->grpc_message_;
    if (self->status_ != 200 && self->status_ != 0) {
      code = self->status_ >= 502 && self->status_ <= 504 ? 14 : 2;
      message = "HTTP " + std::to_string(self->status_);
    } else if (code < 0) {
      code = 14;
      message = error != 0 ? "stream reset: " + std::string(nghttp2_http2_strerror(error)) : "no grpc-status";
    }
    if (self->on_end) self->on_end(code, message);
    return 0;
  }

  nghttp2_session* session_ = nullptr;
  int32_t stream_ = -1;
  std::string body_;
  size_t sent_ = 0;
  int status_ = 0, grpc_code_ = -1;
  std::string grpc_message_, frames_;
};

}  // namespace etcd_sim
