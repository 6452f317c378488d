// cxxrunctl's requests through the store (rendezvous/ctl_requests.h,
// rendezvous/request_watcher.h): numbered, delivered once in order to each
// watcher started before them, answered, gathered by a deadline, cleaned up.
#include <catch2/catch.hpp>

#include <mutex>
#include <thread>
#include <vector>

#include "fake_store.h"
#include "rendezvous/ctl_requests.h"
#include "rendezvous/request_watcher.h"
#include "store/client.h"
#include "vanishing_store.h"

using namespace cxxrun::rendezvous;
using namespace std::chrono_literals;

namespace {

struct Seen {
  std::mutex mu;
  std::vector<std::pair<long long, std::string>> got;
  size_t size() {
    std::lock_guard l(mu);
    return got.size();
  }
};

bool eventually(const std::function<bool()>& done) {
  for (int i = 0; i < 500; ++i) {
    if (done()) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace

TEST_CASE("ctl requests: each watcher gets every request made after it started, once, in order") {
  FakeStore store;
  FakeStore::Client caller(store, "c");
  requests::post(caller, "job", "before");  // made before the watcher: never delivered
  Seen seen;
  {
    RequestWatcher w(std::make_unique<FakeStore::Client>(store, "w"), "job", [&](long long n, const std::string& r) {
      std::lock_guard l(seen.mu);
      seen.got.emplace_back(n, r);
    });
    // The watcher reads the sequence when its thread starts: wait for that.
    REQUIRE(eventually([&] { return caller.check({requests::sequence_key("job")}); }));
    std::this_thread::sleep_for(100ms);
    requests::post(caller, "job", "one");
    requests::post(caller, "job", "two");
    REQUIRE(eventually([&] { return seen.size() == 2; }));
  }
  CHECK(seen.got == std::vector<std::pair<long long, std::string>>{{2, "one"}, {3, "two"}});
}

TEST_CASE("ctl requests: answers gathered by the deadline, the silent node left out, every key deleted") {
  FakeStore store;
  FakeStore::Client c(store, "c");
  const long long n = requests::post(c, "job", "logs");
  requests::answer(c, "job", n, "a", "from a");
  const auto began = std::chrono::steady_clock::now();
  const auto got = requests::gather(c, "job", n, {"a", "b"}, began + 300ms);
  CHECK(got == std::map<std::string, std::string>{{"a", "from a"}});
  CHECK(std::chrono::steady_clock::now() - began < 5s);
  CHECK_FALSE(c.check({requests::request_key("job", n)}));
  CHECK_FALSE(c.check({requests::answer_key("job", n, "a")}));
  CHECK_THROWS_AS(requests::answer(c, "job", n, "a", std::string(requests::kMaxAnswerBytes + 1, 'x')),
                  std::invalid_argument);
}

TEST_CASE("ctl requests: a watcher whose store went away stops within its slices, not the client's deadline") {
  // The chaos suite's restarted-host: the agent's store died; its exit must
  // not wait out the watcher's reconnects (a minute here, read_timeout there).
  VanishingStore store;
  auto client = store.client();
  store.stop();  // the watcher's first call (the sequence) must reconnect
  auto watcher = std::make_unique<RequestWatcher>(std::move(client), "job", [](long long, const std::string&) {});
  std::this_thread::sleep_for(300ms);
  const auto began = std::chrono::steady_clock::now();
  watcher.reset();
  CHECK(std::chrono::steady_clock::now() - began < 10s);
}
