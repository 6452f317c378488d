// The job board in the store (rendezvous/job_board.h): records, the index
// that finds them, chunked reads, the stop request.
#include <catch2/catch.hpp>

#include <atomic>
#include <stdexcept>

#include "fake_store.h"
#include "rendezvous/job_board.h"

using namespace cxxrun::rendezvous;

namespace {

// Counts the MULTI_GETs and their largest batch.
class CountingClient : public FakeStore::Client {
 public:
  using FakeStore::Client::Client;
  std::vector<std::string> multi_get(const std::vector<std::string>& keys) override {
    ++calls;
    largest = std::max(largest, keys.size());
    return FakeStore::Client::multi_get(keys);
  }
  int calls = 0;
  size_t largest = 0;
};

}  // namespace

TEST_CASE("job board: every node's last record, in the order they came, each once") {
  FakeStore store;
  FakeStore::Client a(store, "a"), b(store, "b");
  board::publish(a, "job", "node-a", "{\"v\":1,\"n\":1}", true);
  board::publish(b, "job", "node-b", "{\"v\":1}", true);
  board::publish(a, "job", "node-a", "{\"v\":1,\"n\":2}", false);
  board::publish(a, "job", "node-a", "{\"v\":1,\"n\":3}", true);  // indexed again: listed once
  const auto got = board::read(a, "job");
  REQUIRE(got.size() == 2);
  CHECK(got[0] == std::pair<std::string, std::string>{"node-a", "{\"v\":1,\"n\":3}"});
  CHECK(got[1].first == "node-b");
  CHECK(board::read(a, "another-job").empty());
}

TEST_CASE("job board: 2,500 nodes are read in chunks of kReadChunk") {
  FakeStore store;
  CountingClient c(store, "c");
  for (int i = 0; i < 2500; ++i) board::publish(c, "big", "n" + std::to_string(i), std::to_string(i), true);
  const auto got = board::read(c, "big");
  REQUIRE(got.size() == 2500);
  CHECK(got[2499] == std::pair<std::string, std::string>{"n2499", "2499"});
  CHECK(c.calls == 3);
  CHECK(c.largest == board::kReadChunk);
}

TEST_CASE("job board: a record over the bound, or a node id of two lines, is refused") {
  FakeStore store;
  FakeStore::Client c(store, "c");
  CHECK_THROWS_AS(board::publish(c, "job", "n", std::string(board::kMaxRecordBytes + 1, 'x'), true),
                  std::invalid_argument);
  CHECK_THROWS_AS(board::publish(c, "job", "a\nb", "{}", true), std::invalid_argument);
  CHECK(board::read(c, "job").empty());
  board::publish(c, "job", "n", std::string(board::kMaxRecordBytes, 'x'), true);
  CHECK(board::read(c, "job").size() == 1);
}

TEST_CASE("job board: the stop request, its time and its words") {
  FakeStore store;
  FakeStore::Client c(store, "c");
  CHECK_FALSE(board::stop_requested(c, "job"));
  board::request_stop(c, "job", {1700000000123, "cxxrunctl on h, pid 7"});
  const auto r = board::stop_requested(c, "job");
  REQUIRE(r);
  CHECK(r->at_ms == 1700000000123);
  CHECK(r->why == "cxxrunctl on h, pid 7");
  CHECK_FALSE(board::stop_requested(c, "other"));
}
