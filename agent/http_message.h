// The sliver of HTTP/1.1 the health server speaks: one request head in, one
// response out, then the connection closes. No bodies are read, no
// keep-alive, no chunking: probes and Prometheus scrapers need none of it.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace cxxrun::agent {

struct HttpRequest {
  std::string method;
  std::string path;  // the target without its "?query"
};

// Bytes up to and including the blank line that ends the request head, or 0
// while `received` holds no complete head. Bare "\n" line ends are accepted
// too (RFC 9112 §2.2 lets a server do so; hand-typed nc requests use them).
size_t request_head_size(std::string_view received);

// The request line of a complete head; nullopt unless it reads
// "METHOD SP origin-form-target SP HTTP/1.x".
std::optional<HttpRequest> parse_request_line(std::string_view head);

// A whole response with Content-Length and "Connection: close".
// `extra_headers` is zero or more "Name: value\r\n" lines.
std::string http_response(int status, std::string_view content_type, std::string_view body,
                          std::string_view extra_headers = {});

}  // namespace cxxrun::agent
