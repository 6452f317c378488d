#include "agent/worker_stdio.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace cxxrun::agent {
namespace {

void close_fd(int& fd) {
  if (fd >= 0) close(fd);
  fd = -1;
}

}  // namespace

WorkerStdio open_worker_stdio() {
  int out[2], err[2];
  if (pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error(std::string("cannot create pipes: ") + strerror(errno));
  if (pipe2(err, O_CLOEXEC) != 0) {
    const int e = errno;
    close(out[0]), close(out[1]);
    throw std::runtime_error(std::string("cannot create pipes: ") + strerror(e));
  }
  fcntl(out[0], F_SETFL, O_NONBLOCK);
  fcntl(err[0], F_SETFL, O_NONBLOCK);
  return {out[0], err[0], out[1], err[1]};
}

void close_write_ends(WorkerStdio& s) {
  close_fd(s.out_write);
  close_fd(s.err_write);
}

void close_all(WorkerStdio& s) {
  close_write_ends(s);
  close_fd(s.out_read);
  close_fd(s.err_read);
}

}  // namespace cxxrun::agent
