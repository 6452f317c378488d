// A fake etcd member on loopback for the client's failover tests, scripted
// as etcd's v3 JSON gateway showed requests and took answers, and serving
// gRPC on the wire (fake_grpc_server.h) as a member does: each request is
// handed to the script with its gateway path and its message as the
// gateway's JSON (etcd/gateway_json.h translates), and the script's answer,
// written as the gateway's HTTP answer, is sent as the gRPC call's: a 200
// with a JSON body is the response message; a refusal's JSON
// ({"error":..,"code":N}) is the call's status in trailers; another status
// with a body that is no refusal (a proxy's page) is that HTTP status. A
// chunked answer is a stream of messages, left open (push() sends it
// more; a streamed {"error":{"grpc_code":N,..}} ends it with that status).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "etcd/gateway_json.h"
#include "fake_grpc_server.h"

class FakeEtcdMember {
 public:
  struct Request {
    std::string target;         // the gateway's path: "/v3/kv/range"
    std::string body;           // the request as the gateway's JSON
    std::string authorization;  // the auth token
  };
  // The whole HTTP answer as the gateway would have sent it; "" closes the
  // connection without one; an answer that starts with kCloseAfter is sent,
  // then the connection closed.
  using Script = std::function<std::string(const Request&)>;
  static constexpr const char* kCloseAfter = "CLOSE:";

  static std::string answer(int status, const std::string& json) {
    return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(json.size()) + "\r\n\r\n" + json;
  }
  static std::string ok(const std::string& json) { return answer(200, json); }
  // A watch's stream: its messages so far, and left open.
  static std::string stream(const std::vector<std::string>& messages) {
    std::string out = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (const auto& m : messages) {
      char size[16];
      snprintf(size, sizeof size, "%zx", m.size());
      out += size + std::string("\r\n") + m + "\r\n";
    }
    return out;
  }

  explicit FakeEtcdMember(Script script)
      : script_(std::move(script)), server_([this](const FakeGrpcServer::Call& call) { return serve(call); }) {}

  // One more message (the gateway's JSON) on every watch stream still open;
  // how many got it.
  int push(const std::string& message) {
    if (auto error = etcd_gateway::error_status(message)) return server_.end_streams(error->code, error->message);
    return server_.push(etcd_gateway::response_proto(kWatch, message));
  }

  std::string endpoint() const { return server_.endpoint(); }
  int connections() const { return server_.connections(); }
  std::vector<Request> requests() const {
    std::vector<Request> out;
    for (const auto& call : server_.calls())
      out.push_back({etcd_gateway::gateway_path(call.method), etcd_gateway::request_json(call.method, call.message),
                     call.token});
    return out;
  }
  int count(const std::string& target) const {
    int n = 0;
    for (const auto& call : server_.calls()) n += etcd_gateway::gateway_path(call.method) == target;
    return n;
  }

 private:
  static constexpr const char* kWatch = "/etcdserverpb.Watch/Watch";

  FakeGrpcServer::Answer serve(const FakeGrpcServer::Call& call) {
    std::string out = script_(
        {etcd_gateway::gateway_path(call.method), etcd_gateway::request_json(call.method, call.message), call.token});
    FakeGrpcServer::Answer a;
    if (out.empty()) {
      a.close = true;
      return a;
    }
    if (out.rfind(kCloseAfter, 0) == 0) {
      out.erase(0, std::string(kCloseAfter).size());
      a.close_after = true;
    }
    const size_t head_end = out.find("\r\n\r\n");
    REQUIRE(head_end != std::string::npos);
    const std::string head = out.substr(0, head_end);
    std::string body = out.substr(head_end + 4);
    const int status = std::stoi(head.substr(9, 3));
    if (head.find("Transfer-Encoding: chunked") != std::string::npos) {
      a.keep_open = !a.close_after;
      for (size_t at = 0; at < body.size();) {
        const size_t eol = body.find("\r\n", at);
        const size_t size = std::stoul(body.substr(at, eol - at), nullptr, 16);
        const std::string m = body.substr(eol + 2, size);
        at = eol + 2 + size + 2;
        if (auto error = etcd_gateway::error_status(m)) {
          a.keep_open = false;
          a.code = error->code;
          a.message = error->message;
          break;
        }
        a.messages.push_back(etcd_gateway::response_proto(call.method, m));
      }
      return a;
    }
    if (auto error = etcd_gateway::error_status(body)) {
      a.code = error->code;
      a.message = error->message;
    } else if (status != 200) {
      a.http_status = status;
    } else {
      a.messages.push_back(etcd_gateway::response_proto(call.method, body));
    }
    return a;
  }

  Script script_;
  FakeGrpcServer server_;
};
