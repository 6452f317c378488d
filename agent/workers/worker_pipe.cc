#include "agent/workers/worker_pipe.h"

#include <unistd.h>

#include <chrono>
#include <string_view>

namespace cxxrun::agent {
namespace {

namespace asio = boost::asio;

// How long a worker's stream is quiet before a fragment without a line end
// (a prompt, a progress bar without '\r') reaches the console.
constexpr std::chrono::milliseconds kFragmentIdle{100};

}  // namespace

void WorkerPipe::open(asio::io_context& io, int fd, std::unique_ptr<StreamSink> sink, Closed closed) {
  sink_ = std::move(sink);
  closed_ = std::move(closed);
  fd_ = std::make_unique<asio::posix::stream_descriptor>(io, fd);
  idle_ = std::make_unique<asio::steady_timer>(io);
  read();
}

void WorkerPipe::read() {
  // Handlers of a destroyed pipe run with operation_aborted and n == 0:
  // they touch nothing of it.
  fd_->async_read_some(asio::buffer(buf_), [this](const boost::system::error_code& ec, size_t n) {
    if (n > 0) sink_->write(std::string_view(buf_.data(), n));
    if (n > 0 && sink_->has_pending()) {
      idle_->expires_after(kFragmentIdle);
      idle_->async_wait([sink = sink_.get()](const boost::system::error_code& ec) {
        if (!ec) sink->flush_pending();
      });
    }
    if (!ec) return read();
    if (ec == asio::error::operation_aborted) return;
    boost::system::error_code ignored;
    fd_->close(ignored);
    closed_(true);
  });
}

void WorkerPipe::drain_now() {
  if (!is_open()) return;
  ssize_t n;
  while ((n = ::read(fd_->native_handle(), buf_.data(), buf_.size())) > 0) sink_->write(std::string_view(buf_.data(), n));
}

void WorkerPipe::close() {
  if (!is_open()) return;
  boost::system::error_code ignored;
  fd_->close(ignored);
  closed_(false);
}

}  // namespace cxxrun::agent
