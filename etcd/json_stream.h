// Splits the watch stream's body into its JSON objects. The gateway writes
// one object per message, but chunk boundaries are the transport's: an
// object may arrive in pieces, or several in one read. Objects are found by
// their brace depth (strings and escapes respected), so nothing depends on
// the newline the gateway happens to put between them.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace cxxrun::etcd {

class JsonStream {
 public:
  void feed(std::string_view bytes) { buffer_.append(bytes); }

  // The next complete top-level object, or nullopt until more is fed.
  // Throws EtcdError when the stream holds something other than objects.
  std::optional<std::string> next();

  size_t buffered() const { return buffer_.size() - start_; }
  void clear();

 private:
  std::string buffer_;
  size_t start_ = 0;  // where the current object begins
  size_t scan_ = 0;   // how far it has been scanned
  int depth_ = 0;
  bool in_string_ = false;
  bool escaped_ = false;
};

}  // namespace cxxrun::etcd
