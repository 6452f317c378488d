#include "agent/http_message.h"

#include <fmt/format.h>

#include <algorithm>

namespace cxxrun::agent {
namespace {

std::string_view reason_phrase(int status) {
  switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 500: return "Internal Server Error";
    case 503: return "Service Unavailable";
    default: return "Unknown";
  }
}

bool is_token_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
         std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

}  // namespace

size_t request_head_size(std::string_view received) {
  // The earliest of "\r\n\r\n" and "\n\n" ends the head; "\n\r\n" is a bare
  // line end followed by a CRLF blank line.
  size_t best = 0;
  for (std::string_view end : {"\r\n\r\n", "\n\n", "\n\r\n"}) {
    size_t at = received.find(end);
    if (at != std::string_view::npos && (best == 0 || at + end.size() < best)) best = at + end.size();
  }
  return best;
}

std::optional<HttpRequest> parse_request_line(std::string_view head) {
  std::string_view line = head.substr(0, head.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);

  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos || sp1 == 0) return std::nullopt;
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || sp2 == sp1 + 1) return std::nullopt;
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);

  if (!std::all_of(method.begin(), method.end(), is_token_char)) return std::nullopt;
  if (target.front() != '/' || target.find_first_of(" \t") != std::string_view::npos) return std::nullopt;
  if (version.size() != 8 || version.substr(0, 7) != "HTTP/1.") return std::nullopt;

  return HttpRequest{std::string(method), std::string(target.substr(0, target.find('?')))};
}

std::string http_response(int status, std::string_view content_type, std::string_view body,
                          std::string_view extra_headers) {
  return fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nCache-Control: no-store\r\n"
      "Connection: close\r\n{}\r\n{}",
      status, reason_phrase(status), content_type, body.size(), extra_headers, body);
}

}  // namespace cxxrun::agent
