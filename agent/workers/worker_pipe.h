// One worker stream (stdout or stderr) on its way from its pipe or pty to a
// StreamSink, read on the agent's loop: bytes as they come, a fragment
// without a line end once the worker is quiet, and, when the worker has
// just exited, what it left behind at once (so its failure record carries
// its last lines).
#pragma once

#include <array>
#include <functional>
#include <memory>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "agent/workers/output.h"

namespace cxxrun::agent {

class WorkerPipe {
 public:
  // `ended`: the stream reached its end by itself (EOF, or EIO on a pty
  // once every holder of its slave closed it), not by close().
  using Closed = std::function<void(bool ended)>;

  // Takes `fd` and reads it into `sink` until its end; `closed` runs once,
  // on the loop, when the stream ends or close() closes it.
  void open(boost::asio::io_context& io, int fd, std::unique_ptr<StreamSink> sink, Closed closed);
  // Reads what is in the pipe now, without waiting.
  void drain_now();
  // Closes it now (a process that escaped the job holds its other end).
  void close();

  // nullptr until opened (a worker whose exec failed has none).
  StreamSink* sink() const { return sink_.get(); }

 private:
  void read();
  bool is_open() const { return fd_ && fd_->is_open(); }

  std::unique_ptr<boost::asio::posix::stream_descriptor> fd_;
  std::unique_ptr<StreamSink> sink_;
  // Shows a fragment the worker left without a line end once it is quiet.
  std::unique_ptr<boost::asio::steady_timer> idle_;
  Closed closed_;
  std::array<char, 16384> buf_;
};

}  // namespace cxxrun::agent
