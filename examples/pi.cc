// A small multi-process job for cxxrun: every rank estimates pi by Monte Carlo
// on its own shard of samples (seeded by rank, so a run is reproducible) and
// reports its hits. Until the collectives land, ranks do not combine results.
//
//   cxxrun --standalone --nproc-per-node=4 build/examples/pi [--samples N] [--fail-rank R]
//
// --fail-rank R makes rank R fail on the first attempt (writing torchelastic's
// error file), to show a restart with --max-restarts=1.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "worker_runtime/error_file.h"
#include "worker_runtime/worker_env_reader.h"

int main(int argc, char** argv) {
  long long samples = 4'000'000;
  int fail_rank = -1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--samples") && i + 1 < argc)
      samples = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--fail-rank") && i + 1 < argc)
      fail_rank = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "pi: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  cxxrun::worker::WorkerEnv env;
  try {
    env = cxxrun::worker::read_worker_env();
  } catch (const cxxrun::worker::EnvError& e) {
    std::fprintf(stderr, "pi: %s\n", e.what());
    return 2;
  }
  if (env.rank == fail_rank && env.restart_count == 0) {
    std::string msg = "rank " + std::to_string(env.rank) + " failed on purpose (--fail-rank)";
    cxxrun::worker::write_error_file(msg);
    std::fprintf(stderr, "pi: %s\n", msg.c_str());
    return 1;
  }
  const long long begin = samples * env.rank / env.world_size;
  const long long end = samples * (env.rank + 1) / env.world_size;
  std::mt19937_64 rng(12345 + env.rank);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  long long hits = 0;
  for (long long i = begin; i < end; ++i) {
    double x = unit(rng), y = unit(rng);
    hits += x * x + y * y <= 1.0;
  }
  std::printf("rank %d/%d (local %d, attempt %d): %lld of %lld samples inside, pi ~ %.5f\n", env.rank,
              env.world_size, env.local_rank, env.restart_count, hits, end - begin,
              4.0 * hits / double(end - begin));
  return 0;
}
