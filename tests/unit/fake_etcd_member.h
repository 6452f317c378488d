// A fake etcd member on loopback for the client's failover tests: a thread
// per HTTP/1.1 connection, each request answered with what the script
// returns for it (one script call at a time). A watch's stream stays open
// (push() sends it more). Every wait polls with a timeout, so a client bug
// fails a test instead of hanging it.
#pragma once

#include <cstdio>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

class FakeEtcdMember {
 public:
  struct Request {
    std::string target;
    std::string body;
    std::string authorization;
  };
  // The whole HTTP answer; "" closes the connection without one; an answer
  // that starts with kCloseAfter is sent, then the connection closed.
  using Script = std::function<std::string(const Request&)>;
  static constexpr const char* kCloseAfter = "CLOSE:";

  static std::string answer(int status, const std::string& json) {
    return "HTTP/1.1 " + std::to_string(status) + " X\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(json.size()) + "\r\n\r\n" + json;
  }
  static std::string ok(const std::string& json) { return answer(200, json); }
  // A watch's stream as the gateway sends it: chunked, and left open.
  static std::string stream(const std::vector<std::string>& messages) {
    std::string out = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n";
    for (const auto& m : messages) {
      char size[16];
      snprintf(size, sizeof size, "%zx", m.size());
      out += size + std::string("\r\n") + m + "\r\n";
    }
    return out;
  }

  explicit FakeEtcdMember(Script script) : script_(std::move(script)) {
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
  ~FakeEtcdMember() {
    stop_ = true;
    thread_.join();
    for (auto& t : connection_threads_) t.join();
    close(listener_);
  }

  // One more message on every watch stream still open; how many got it.
  int push(const std::string& message) {
    char size[16];
    snprintf(size, sizeof size, "%zx", message.size());
    const std::string chunk = size + std::string("\r\n") + message + "\r\n";
    std::lock_guard lock(mutex_);
    int sent = 0;
    for (int fd : streams_) sent += ::send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(chunk.size());
    return sent;
  }

  std::string endpoint() const { return "127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_; }
  std::vector<Request> requests() const {
    std::lock_guard lock(mutex_);
    return requests_;
  }
  int count(const std::string& target) const {
    int n = 0;
    for (const auto& r : requests()) n += r.target == target;
    return n;
  }

 private:
  bool readable(int fd) {
    while (!stop_) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 20) > 0) return true;
    }
    return false;
  }

  void serve() {
    while (readable(listener_)) {
      int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      ++connections_;
      connection_threads_.emplace_back([this, fd] {
        serve_connection(fd);
        {
          std::lock_guard lock(mutex_);
          streams_.erase(std::remove(streams_.begin(), streams_.end(), fd), streams_.end());
        }
        close(fd);
      });
    }
  }

  void serve_connection(int fd) {
    std::string in;
    while (true) {
      auto head_end = in.find("\r\n\r\n");
      while (head_end == std::string::npos) {
        if (!read_more(fd, in)) return;
        head_end = in.find("\r\n\r\n");
      }
      std::string head = in.substr(0, head_end);
      size_t length = std::stoul(header(head, "content-length", "0"));
      while (in.size() < head_end + 4 + length)
        if (!read_more(fd, in)) return;
      Request r{head.substr(5, head.find(' ', 5) - 5), in.substr(head_end + 4, length), header(head, "authorization", "")};
      in.erase(0, head_end + 4 + length);
      {
        std::lock_guard lock(mutex_);
        requests_.push_back(r);
      }
      std::string out;
      {
        std::lock_guard lock(script_mutex_);
        out = script_(r);
      }
      if (out.empty()) return;
      bool close_after = out.rfind(kCloseAfter, 0) == 0;
      if (close_after) out.erase(0, std::string(kCloseAfter).size());
      std::lock_guard lock(mutex_);
      if (::send(fd, out.data(), out.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(out.size()) || close_after) return;
      if (out.find("Transfer-Encoding: chunked") != std::string::npos) streams_.push_back(fd);
    }
  }

  bool read_more(int fd, std::string& in) {
    if (!readable(fd)) return false;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    in.append(buf, static_cast<size_t>(n));
    return true;
  }

  static std::string header(const std::string& head, const std::string& name, const std::string& fallback) {
    std::string lower;
    for (char c : head) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto at = lower.find("\r\n" + name + ":");
    if (at == std::string::npos) return fallback;
    auto start = head.find_first_not_of(' ', at + 3 + name.size());
    return head.substr(start, head.find("\r\n", start) - start);
  }

  Script script_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  mutable std::mutex mutex_;  // requests_, streams_, and sends
  std::mutex script_mutex_;
  std::vector<Request> requests_;
  std::vector<int> streams_;
  std::vector<std::thread> connection_threads_;
  std::thread thread_;
};
