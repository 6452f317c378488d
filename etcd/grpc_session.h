// The HTTP/2 side of a GrpcConnection: one nghttp2 client session that
// turns gRPC calls into frames and frames back into gRPC answers, with no
// I/O of its own (bytes in through receive(), out through take_output()), so
// the connection decides when to read, write and give up. Internal to etcd/.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <string>

#include "etcd/grpc_call.h"

struct nghttp2_session;

namespace cxxrun::etcd {

// What has arrived on one call's stream so far.
struct GrpcStream {
  std::string request;  // the framed request message, sent from `offset`
  size_t offset = 0;
  bool headers = false;  // the answer's headers arrived
  int http_status = 0;
  std::string content_type;
  bool has_status = false;           // grpc-status came, in the trailers or a trailers-only answer
  GrpcStatus status;
  std::deque<std::string> messages;  // whole messages not yet taken
  std::string partial;               // the bytes of a message still arriving
  bool ended = false;                // the member ended its side (END_STREAM)
  bool closed = false;               // the stream is closed, ended or reset
  uint32_t reset_code = 0;           // RST_STREAM's or GOAWAY's error code, when closed without ending
  std::string error;                 // the answer broke gRPC's framing; the stream is useless
};

class GrpcSession {
 public:
  // scheme "http" or "https"; authority "host:port". Queues the client
  // preface and our settings: a 16 MiB window per stream and for the
  // connection, so a large answer is not held up by flow control.
  GrpcSession(std::string scheme, std::string authority);
  ~GrpcSession();
  GrpcSession(const GrpcSession&) = delete;
  GrpcSession& operator=(const GrpcSession&) = delete;

  // Starts a call: one stream whose request is the message, framed, and the
  // end of our side. Returns the stream's id. Throws std::runtime_error when
  // the session cannot take another stream.
  int32_t submit(const GrpcRequest& request);

  // Feeds bytes read from the member. Throws std::runtime_error (the
  // connection is then unusable) when they are not HTTP/2.
  void receive(const char* data, size_t size);

  // The bytes nghttp2 wants sent (frames, acknowledgements of the member's
  // SETTINGS and PINGs, window updates), appended to `out`.
  void take_output(std::string& out);

  // The stream's state; nullptr for an id the session does not know.
  GrpcStream* stream(int32_t id);
  // Drops a stream's state; one still open is reset (CANCEL) first.
  void forget(int32_t id);

  // The member sent GOAWAY (it is going down or closing an idle
  // connection): no new stream may start here.
  bool going_away() const { return going_away_; }
  // Bytes have come from the member since the session began.
  bool heard() const { return heard_; }

  // The largest message accepted; a longer one breaks the stream.
  static constexpr uint32_t kMessageLimit = uint32_t(256) << 20;
  static constexpr int32_t kWindow = 16 << 20;

 private:
  struct Callbacks;
  nghttp2_session* session_ = nullptr;
  std::string scheme_;
  std::string authority_;
  std::map<int32_t, GrpcStream> streams_;
  bool going_away_ = false;
  bool heard_ = false;
};

// grpc-message's percent-encoding undone ("%25" is "%"); a malformed escape
// is kept as it came.
std::string percent_decode(const std::string& text);

// gRPC's status for an answer whose HTTP status is not 200, as gRPC maps it.
int grpc_code_for_http(int http_status);

}  // namespace cxxrun::etcd
