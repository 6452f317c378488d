// The Gloo communicator with its ranks as threads of this process: real
// store, real TCP pairs, no launcher. Catch2 assertions are not thread-safe,
// so threads record what they saw and the test thread checks it.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "store/client.h"
#include "net/endpoint.h"
#include "store/server.h"
#include "worker_runtime/communicator.h"
#include "worker_runtime/gloo_communicator.h"

using namespace cxxrun::worker;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

namespace {

BootstrapEnv job_env(int port, int generation = 0, bool agent_store = false) {
  BootstrapEnv env;
  env.worker.master_addr = "127.0.0.1";
  env.worker.master_port = port;
  env.worker.restart_count = generation;
  env.use_agent_store = agent_store;
  return env;
}

Options short_options(std::chrono::milliseconds timeout = 10s) {
  Options o;
  o.timeout = timeout;
  return o;
}

// Runs body(rank, communicator) on n threads; returns each rank's error ("" = none).
std::vector<std::string> run_ranks(int n, BootstrapEnv env, const Options& options,
                                   const std::function<void(int, Communicator&)>& body) {
  std::vector<std::string> errors(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r, env]() mutable {
      env.worker.rank = r;
      env.worker.world_size = n;
      try {
        auto comm = make_gloo_communicator(env, options);
        body(r, *comm);
      } catch (const std::exception& e) {
        errors[r] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

int free_port() { return cxxrun::net::pick_free_port("127.0.0.1"); }

}  // namespace

TEST_CASE("every collective agrees across three ranks") {
  struct Seen {
    int64_t sum = 0;
    double avg = 0;
    int32_t int_avg = 0, min = 0, max = 0;
    std::vector<float> bcast = std::vector<float>(4);
    std::vector<int32_t> gathered = std::vector<int32_t>(6);
    std::vector<int64_t> scattered = std::vector<int64_t>(2);
  };
  std::vector<Seen> seen(3);
  auto errors = run_ranks(3, job_env(free_port()), short_options(), [&](int r, Communicator& c) {
    Seen& s = seen[r];
    s.sum = r + 1;
    c.allreduce(&s.sum, 1, DType::int64, ReduceOp::sum);
    s.avg = r;
    c.allreduce(&s.avg, 1, DType::float64, ReduceOp::avg);
    s.int_avg = -r;  // -3 / 3 = -1; -(0+1+2) truncates toward zero
    c.allreduce(&s.int_avg, 1, DType::int32, ReduceOp::avg);
    s.min = s.max = 10 - r;
    c.allreduce(&s.min, 1, DType::int32, ReduceOp::min);
    c.allreduce(&s.max, 1, DType::int32, ReduceOp::max);
    if (r == 2) s.bcast = {1.5f, 2.5f, 3.5f, 4.5f};
    c.broadcast(s.bcast.data(), 4, DType::float32, 2);
    int32_t mine[2] = {r, 10 * r};
    c.allgather(mine, s.gathered.data(), 2, DType::int32);
    std::vector<int64_t> in = {r + 0, r + 1, r + 2, r + 3, r + 4, r + 5};
    c.reduce_scatter(in.data(), s.scattered.data(), 2, DType::int64, ReduceOp::sum);
    c.barrier();
  });
  for (int r = 0; r < 3; ++r) {
    INFO("rank " << r);
    CHECK(errors[r] == "");
    CHECK(seen[r].sum == 6);
    CHECK(seen[r].avg == 1.0);
    CHECK(seen[r].int_avg == -1);
    CHECK(seen[r].min == 8);
    CHECK(seen[r].max == 10);
    CHECK(seen[r].bcast == std::vector<float>{1.5f, 2.5f, 3.5f, 4.5f});
    CHECK(seen[r].gathered == std::vector<int32_t>{0, 0, 1, 10, 2, 20});
    // Element k sums to 0+1+2 + 3k; rank r keeps k = 2r, 2r+1.
    CHECK(seen[r].scattered == std::vector<int64_t>{3 + 6 * r, 6 + 6 * r});
  }
}

TEST_CASE("float16 and bfloat16 ask for the NCCL backend, and bad arguments leave the communicator usable") {
  std::vector<std::string> messages;
  int64_t after = 0;
  auto errors = run_ranks(1, job_env(free_port()), short_options(), [&](int, Communicator& c) {
    uint16_t half[2] = {};
    for (auto call : std::vector<std::function<void()>>{
             [&] { c.allreduce(half, 2, DType::float16, ReduceOp::sum); },
             [&] { c.allgather(half, half, 1, DType::bfloat16); },
             [&] { c.broadcast(half, 1, DType::int32, 1); },
             [&] { c.reduce_scatter(nullptr, half, 1, DType::int32, ReduceOp::sum); }}) {
      try {
        call();
        messages.push_back("no error");
      } catch (const CollectiveError& e) {
        messages.push_back(e.what());
      }
    }
    after = 7;
    c.allreduce(&after, 1, DType::int64, ReduceOp::sum);
  });
  CHECK(errors[0] == "");
  REQUIRE(messages.size() == 4);
  CHECK_THAT(messages[0], Catch::Contains("allreduce on rank 0 of 1") && Catch::Contains("float16 needs the NCCL backend"));
  CHECK_THAT(messages[1], Catch::Contains("bfloat16 needs the NCCL backend"));
  CHECK_THAT(messages[2], Catch::Contains("root 1 is not a rank"));
  CHECK_THAT(messages[3], Catch::Contains("null buffer"));
  CHECK(after == 7);
  CHECK(dtype_size(DType::bfloat16) == 2);
  CHECK(dtype_size(DType::int64) == 8);
}

TEST_CASE("a peer that goes away mid-allreduce is an error on the survivor, and stays one") {
  std::string first, second;
  long long ms = -1;
  auto errors = run_ranks(2, job_env(free_port()), short_options(5s), [&](int r, Communicator& c) {
    c.barrier();
    if (r == 1) {
      std::this_thread::sleep_for(200ms);
      return;  // destroys rank 1's communicator: its connections close
    }
    std::vector<float> v(1 << 16, 1.0f);
    auto start = Clock::now();
    try {
      for (int i = 0; i < 100000; ++i) c.allreduce(v.data(), v.size(), DType::float32, ReduceOp::sum);
    } catch (const CollectiveError& e) {
      first = e.what();
    }
    ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
    try {
      c.barrier();
    } catch (const CollectiveError& e) {
      second = e.what();
    }
  });
  CHECK(errors == std::vector<std::string>{"", ""});
  CHECK_THAT(first, Catch::Contains("allreduce on rank 0 of 2 (group 'default', generation 0)"));
  CHECK(ms < 5000 + 1000);
  CHECK_THAT(second, Catch::Contains("barrier on rank 0") && Catch::Contains("failed earlier"));
}

TEST_CASE("bootstrap ends by the timeout when a rank never arrives") {
  BootstrapEnv env = job_env(free_port());
  env.worker.world_size = 2;
  auto start = Clock::now();
  CHECK_THROWS_WITH(make_gloo_communicator(env, short_options(500ms)),
                    Catch::Contains("bootstrap on rank 0 of 2") && Catch::Contains("binding 127.0.0.1"));
  CHECK(Clock::now() - start < 3s);
}

TEST_CASE("a store nobody serves is an error naming MASTER_ADDR and MASTER_PORT") {
  BootstrapEnv env = job_env(free_port());
  env.worker.rank = 1;
  env.worker.world_size = 2;
  auto start = Clock::now();
  CHECK_THROWS_WITH(make_gloo_communicator(env, short_options(300ms)),
                    Catch::Contains("rank 1 cannot reach the store at MASTER_ADDR=127.0.0.1 MASTER_PORT=" +
                                    std::to_string(env.worker.master_port)));
  CHECK(Clock::now() - start < 3s);
}

TEST_CASE("generations on a store that outlives them use their own keys") {
  cxxrun::store::BackgroundStoreServer server({"127.0.0.1", 0});
  auto sum_of_ranks = [](int, Communicator& c) {
    int64_t x = c.rank() + 1;
    c.allreduce(&x, 1, DType::int64, ReduceOp::sum);
    if (x != 3) throw std::runtime_error("sum " + std::to_string(x));
  };
  cxxrun::store::StoreClient::Options o;
  o.port = server.port();
  o.timeout = 5s;
  auto probe = cxxrun::store::StoreClient::connect(o);
  for (int generation : {0, 1}) {
    INFO("generation " << generation);
    // Twice per generation: the second communicator of a group gets the next
    // instance number instead of the first one's keys.
    for (int instance : {0, 1}) {
      auto errors = run_ranks(2, job_env(server.port(), generation, true), short_options(), sum_of_ranks);
      CHECK(errors == std::vector<std::string>{"", ""});
      CHECK(probe->check({std::to_string(generation) + "/default/" + std::to_string(instance) + "/rank_1"}));
    }
  }
}

TEST_CASE("Options::bind_address is what Gloo binds") {
  Options options = short_options(2s);
  options.bind_address = "127.0.0.1";
  auto errors = run_ranks(2, job_env(free_port()), options, [](int, Communicator& c) { c.barrier(); });
  CHECK(errors == std::vector<std::string>{"", ""});
  // TEST-NET-1: an address no interface here has.
  options.bind_address = "192.0.2.1";
  errors = run_ranks(1, job_env(free_port()), options, [](int, Communicator&) {});
  CHECK_THAT(errors[0], Catch::Contains("bootstrap on rank 0 of 1") && Catch::Contains("binding 192.0.2.1"));
}

TEST_CASE("init reads the launcher's environment and builds a Gloo communicator") {
  CHECK_THROWS_AS(init(), EnvError);
  const std::string port = std::to_string(free_port());
  for (auto [k, v] : {std::pair{"RANK", "0"}, {"WORLD_SIZE", "1"}, {"LOCAL_RANK", "0"}, {"MASTER_ADDR", "127.0.0.1"},
                      {"MASTER_PORT", port.c_str()}})
    setenv(k, v, 1);
#ifndef CXXRUN_HAVE_NCCL
  // Built with NCCL, test_worker_nccl.cc checks Backend::nccl instead.
  Options nccl;
  nccl.backend = Backend::nccl;
  CHECK_THROWS_WITH(init(nccl), Catch::Contains("cxxrun was built without NCCL"));
#endif
  auto comm = init(short_options());
  CHECK(comm->rank() == 0);
  CHECK(comm->size() == 1);
  CHECK(comm->backend() == Backend::gloo);
  double x = 2.5;
  comm->allreduce(&x, 1, DType::float64, ReduceOp::avg);
  CHECK(x == 2.5);
  for (auto k : {"RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"}) unsetenv(k);
}
