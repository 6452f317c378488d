#include "etcd/json_stream.h"

#include "etcd/errors.h"

namespace cxxrun::etcd {

std::optional<std::string> JsonStream::next() {
  for (; scan_ < buffer_.size(); ++scan_) {
    char c = buffer_[scan_];
    if (depth_ == 0) {
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        start_ = scan_ + 1;
        continue;
      }
      if (c != '{')
        throw EtcdError("watch stream: expected a JSON object, got '" + std::string(1, c) + "'");
    }
    if (in_string_) {
      if (escaped_) escaped_ = false;
      else if (c == '\\') escaped_ = true;
      else if (c == '"') in_string_ = false;
      continue;
    }
    if (c == '"') in_string_ = true;
    else if (c == '{' || c == '[') ++depth_;
    else if ((c == '}' || c == ']') && --depth_ == 0) {
      std::string object = buffer_.substr(start_, scan_ + 1 - start_);
      start_ = ++scan_;
      // Drop what was consumed once it is most of the buffer, so a long-lived
      // stream does not grow without bound nor copy on every object.
      if (start_ > 4096 && start_ * 2 > buffer_.size()) {
        buffer_.erase(0, start_);
        scan_ -= start_;
        start_ = 0;
      }
      return object;
    }
  }
  return std::nullopt;
}

void JsonStream::clear() {
  buffer_.clear();
  start_ = scan_ = 0;
  depth_ = 0;
  in_string_ = escaped_ = false;
}

}  // namespace cxxrun::etcd
