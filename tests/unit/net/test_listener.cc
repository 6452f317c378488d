#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>

#include "net/listener.h"

using namespace cxxrun::net;
using tcp = boost::asio::ip::tcp;
using namespace std::chrono_literals;

TEST_CASE("accept loop: out of file descriptors, it retries and takes the connection once it can") {
  boost::asio::io_context io;
  AcceptLoop loop(io, "test");
  REQUIRE_FALSE(listen_on_first(loop.acceptor(), {tcp::endpoint(boost::asio::ip::address_v4::loopback(), 0)}, 16));
  int accepted = 0;
  loop.start(std::make_shared<int>(0), [&](tcp::socket) { ++accepted; });

  rlimit saved{};
  REQUIRE(getrlimit(RLIMIT_NOFILE, &saved) == 0);
  const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(client >= 0);
  // Every descriptor below the lowest free one is taken: with that as the
  // limit, accept() fails with EMFILE.
  const int probe = fcntl(client, F_DUPFD_CLOEXEC, 0);
  REQUIRE(probe >= 0);
  close(probe);
  rlimit low = saved;
  low.rlim_cur = probe;
  REQUIRE(setrlimit(RLIMIT_NOFILE, &low) == 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(loop.acceptor().local_endpoint().port());
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(connect(client, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);

  io.run_for(300ms);
  CHECK(accepted == 0);
  REQUIRE(setrlimit(RLIMIT_NOFILE, &saved) == 0);
  for (int i = 0; i < 50 && accepted == 0; ++i) io.run_for(20ms);
  CHECK(accepted == 1);
  loop.close();
  io.run_for(10ms);  // the aborted accept completes
  close(client);
}
