// GrpcSession on nghttp2's client session in its memory form (mem_recv,
// mem_send): nghttp2 keeps the HTTP/2 state (frames, HPACK, flow control,
// SETTINGS and PING acknowledgements); this file keeps each call's answer
// and splits its DATA into gRPC messages. nghttp2 calls back into C++ from
// C: no exception may cross it, so each callback catches and fails the
// session instead.
#include "etcd/grpc_session.h"

#include <nghttp2/nghttp2.h>

#include <stdexcept>
#include <string_view>

namespace cxxrun::etcd {
namespace {

constexpr size_t kFrameHeader = 5;  // gRPC's: a compressed flag, a 4-byte big-endian length

nghttp2_nv header(std::string_view name, std::string_view value) {
  return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
          reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(), value.size(),
          NGHTTP2_NV_FLAG_NONE};
}

int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int parse_int(std::string_view text) {
  int n = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || n > 100000) return -1;
    n = n * 10 + (c - '0');
  }
  return text.empty() ? -1 : n;
}

// Takes every whole message off the front of the stream's bytes.
void split_messages(GrpcStream& s) {
  size_t at = 0;
  while (s.partial.size() - at >= kFrameHeader) {
    const auto* p = reinterpret_cast<const unsigned char*>(s.partial.data() + at);
    const uint32_t length = uint32_t(p[1]) << 24 | uint32_t(p[2]) << 16 | uint32_t(p[3]) << 8 | p[4];
    if (p[0] != 0) {
      s.error = "the member sent a compressed message (none was asked for)";
      return;
    }
    if (length > GrpcSession::kMessageLimit) {
      s.error = "the member sent a message of " + std::to_string(length) + " bytes (the limit is " +
                std::to_string(GrpcSession::kMessageLimit) + ")";
      return;
    }
    if (s.partial.size() - at < kFrameHeader + length) {
      // A large message arrives a DATA frame at a time: one allocation for it.
      if (at == 0) s.partial.reserve(kFrameHeader + length);
      break;
    }
    if (at == 0 && s.partial.size() == kFrameHeader + length) {
      // The usual large answer: one message, the buffer's whole; no copy.
      s.partial.erase(0, kFrameHeader);
      s.messages.push_back(std::move(s.partial));
      s.partial.clear();
      return;
    }
    s.messages.emplace_back(s.partial, at + kFrameHeader, length);
    at += kFrameHeader + length;
  }
  s.partial.erase(0, at);
}

}  // namespace

struct GrpcSession::Callbacks {
  static GrpcSession& self(void* user) { return *static_cast<GrpcSession*>(user); }

  static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name, size_t namelen,
                       const uint8_t* value, size_t valuelen, uint8_t, void* user) {
    if (frame->hd.type != NGHTTP2_HEADERS) return 0;
    GrpcStream* s = self(user).stream(frame->hd.stream_id);
    if (!s) return 0;
    try {
      const std::string_view n(reinterpret_cast<const char*>(name), namelen);
      const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
      if (n == ":status") {
        s->http_status = parse_int(v);
      } else if (n == "content-type") {
        s->content_type = v;
      } else if (n == "grpc-status") {
        s->has_status = true;
        s->status.code = parse_int(v);
      } else if (n == "grpc-message") {
        s->status.message = percent_decode(std::string(v));
      }
    } catch (const std::exception&) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  }

  static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
    GrpcSession& me = self(user);
    if (frame->hd.type == NGHTTP2_GOAWAY) me.going_away_ = true;
    GrpcStream* s = frame->hd.stream_id ? me.stream(frame->hd.stream_id) : nullptr;
    if (!s) return 0;
    // An interim answer (1xx) is not the answer's headers.
    if (frame->hd.type == NGHTTP2_HEADERS && frame->headers.cat == NGHTTP2_HCAT_RESPONSE && s->http_status >= 200)
      s->headers = true;
    if ((frame->hd.type == NGHTTP2_HEADERS || frame->hd.type == NGHTTP2_DATA) &&
        (frame->hd.flags & NGHTTP2_FLAG_END_STREAM))
      s->ended = true;
    return 0;
  }

  static int on_data_chunk(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len, void* user) {
    GrpcStream* s = self(user).stream(id);
    if (!s || !s->error.empty()) return 0;
    try {
      s->partial.append(reinterpret_cast<const char*>(data), len);
      split_messages(*s);
    } catch (const std::exception&) {
      return NGHTTP2_ERR_CALLBACK_FAILURE;
    }
    return 0;
  }

  static int on_stream_close(nghttp2_session*, int32_t id, uint32_t error_code, void* user) {
    if (GrpcStream* s = self(user).stream(id)) {
      s->closed = true;
      if (!s->ended) s->reset_code = error_code;
    }
    return 0;
  }

  // The request's body, as flow control lets it go.
  static ssize_t read_request(nghttp2_session*, int32_t id, uint8_t* buf, size_t length, uint32_t* flags,
                              nghttp2_data_source*, void* user) {
    GrpcStream* s = self(user).stream(id);
    if (!s) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
    const size_t n = std::min(length, s->request.size() - s->offset);
    s->request.copy(reinterpret_cast<char*>(buf), n, s->offset);
    s->offset += n;
    if (s->offset == s->request.size()) {
      *flags |= NGHTTP2_DATA_FLAG_EOF;
      std::string().swap(s->request);
      s->offset = 0;
    }
    return static_cast<ssize_t>(n);
  }
};

GrpcSession::GrpcSession(std::string scheme, std::string authority)
    : scheme_(std::move(scheme)), authority_(std::move(authority)) {
  nghttp2_session_callbacks* callbacks = nullptr;
  if (nghttp2_session_callbacks_new(&callbacks) != 0) throw std::bad_alloc();
  nghttp2_session_callbacks_set_on_header_callback(callbacks, Callbacks::on_header);
  nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, Callbacks::on_frame_recv);
  nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, Callbacks::on_data_chunk);
  nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, Callbacks::on_stream_close);
  const int rv = nghttp2_session_client_new(&session_, callbacks, this);
  nghttp2_session_callbacks_del(callbacks);
  if (rv != 0) throw std::runtime_error(std::string("HTTP/2: ") + nghttp2_strerror(rv));
  const nghttp2_settings_entry settings[] = {
      {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
      {NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE, static_cast<uint32_t>(kWindow)},
  };
  nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings, std::size(settings));
  // The connection's window is not a setting: it grows by a WINDOW_UPDATE.
  nghttp2_session_set_local_window_size(session_, NGHTTP2_FLAG_NONE, 0, kWindow);
}

GrpcSession::~GrpcSession() { nghttp2_session_del(session_); }

int32_t GrpcSession::submit(const GrpcRequest& request) {
  std::string body(kFrameHeader, '\0');
  const auto length = static_cast<uint32_t>(request.message.size());
  for (int i = 0; i < 4; ++i) body[1 + i] = static_cast<char>(length >> (24 - 8 * i));
  body += request.message;
  nghttp2_nv headers[] = {
      header(":method", "POST"),
      header(":scheme", scheme_),
      header(":path", request.method),
      header(":authority", authority_),
      header("content-type", "application/grpc"),
      header("te", "trailers"),
      header("user-agent", "cxxrun-etcd"),
      header(kRequireLeaderHeader, "true"),
      header("token", request.token),
  };
  const size_t count = std::size(headers) - (request.token.empty() ? 1 : 0);
  nghttp2_data_provider provider{};
  provider.read_callback = Callbacks::read_request;
  const int32_t id = nghttp2_submit_request(session_, nullptr, headers, count, &provider, nullptr);
  if (id < 0) throw std::runtime_error(std::string("HTTP/2: cannot start a stream: ") + nghttp2_strerror(id));
  streams_[id].request = std::move(body);
  return id;
}

void GrpcSession::receive(const char* data, size_t size) {
  if (size > 0) heard_ = true;
  const ssize_t rv = nghttp2_session_mem_recv(session_, reinterpret_cast<const uint8_t*>(data), size);
  if (rv < 0) throw std::runtime_error(std::string("the answer was not HTTP/2: ") + nghttp2_strerror(static_cast<int>(rv)));
}

void GrpcSession::take_output(std::string& out) {
  while (true) {
    const uint8_t* bytes = nullptr;
    const ssize_t n = nghttp2_session_mem_send(session_, &bytes);
    if (n < 0) throw std::runtime_error(std::string("HTTP/2: ") + nghttp2_strerror(static_cast<int>(n)));
    if (n == 0) return;
    out.append(reinterpret_cast<const char*>(bytes), static_cast<size_t>(n));
  }
}

GrpcStream* GrpcSession::stream(int32_t id) {
  auto it = streams_.find(id);
  return it == streams_.end() ? nullptr : &it->second;
}

void GrpcSession::forget(int32_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  if (!it->second.closed) nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
  streams_.erase(it);
}

std::string percent_decode(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

int grpc_code_for_http(int http_status) {
  switch (http_status) {
    case 400: return 13;  // internal
    case 401: return 16;  // unauthenticated
    case 403: return 7;   // permission denied
    case 404: return 12;  // unimplemented
    case 429: case 502: case 503: case 504: return 14;  // unavailable
    default: return 2;    // unknown
  }
}

}  // namespace cxxrun::etcd
