// Data-parallel training under cxxrun, in plain C++: every rank fits the MLP
// of model.h on its contiguous shard of a seeded data set, and one float64
// allreduce per step turns the shards' gradient sums into the full-batch
// mean gradient, so N ranks take exactly the steps 1 rank would (to
// rounding). Rank 0 logs, checkpoints atomically, and on a restart
// (TORCHELASTIC_RESTART_COUNT > 0) loads the checkpoint and broadcasts it.
//
//   cxxrun --standalone --nproc-per-node=4 build/examples/train --steps 300
//   cxxrun --standalone --nproc-per-node=4 --max-restarts=1 build/examples/train
//       --fail-at-step 120 --fail-rank 2      # dies once, resumes from step 100
#include <CLI/CLI.hpp>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "examples/support/device_buffer.h"
#include "examples/support/run_worker.h"
#include "examples/train/checkpoint.h"
#include "examples/train/model.h"
#include "worker_runtime/communicator.h"
#include "worker_runtime/heartbeat.h"

namespace ex = cxxrun::examples;
namespace tr = cxxrun::examples::train;
namespace wk = cxxrun::worker;

namespace {

struct Flags {
  int64_t steps = 300;
  double lr = 0.5;
  int64_t samples = 4096;
  int64_t checkpoint_every = 50;
  int64_t log_every = 50;
  std::string checkpoint_dir = "./checkpoints";
  wk::Options options;
  int64_t fail_at_step = -1;
  int fail_rank = 0;
  double step_timeout = 60;
};

// Rank 0's view of where training starts: its own job's checkpoint on a
// restart, the seeded initial parameters otherwise.
tr::Checkpoint starting_point(const Flags& flags, const wk::WorkerEnv& env) {
  tr::Checkpoint start{0, env.run_id, tr::initial_params()};
  if (env.restart_count == 0) return start;
  auto saved = tr::load_checkpoint(flags.checkpoint_dir);
  if (!saved) {
    std::printf("restart %d: no checkpoint in %s yet, starting from step 0\n", env.restart_count,
                flags.checkpoint_dir.c_str());
  } else if (saved->run_id != env.run_id) {
    std::printf("restart %d: ignoring %s, written by run %s, not this run (%s); starting from step 0\n",
                env.restart_count, tr::checkpoint_path(flags.checkpoint_dir).c_str(), saved->run_id.c_str(),
                env.run_id.c_str());
  } else if (saved->params.size() != tr::kParamCount) {
    throw std::runtime_error(tr::checkpoint_path(flags.checkpoint_dir) + " holds another model's parameters");
  } else {
    start = std::move(*saved);
    std::printf("resumed from step %lld\n", static_cast<long long>(start.step));
  }
  return start;
}

int train(const Flags& flags) {
  using clock = std::chrono::steady_clock;
  const wk::WorkerEnv env = wk::read_worker_env();
  // Hang detection is an aid: a worker that cannot report still trains.
  if (cxxrun_heartbeat_init() != 0) std::perror("train: heartbeat reporting off");
  ex::select_device(flags.options.backend, env.local_rank);
  auto comm = wk::init(flags.options);
  const int rank = comm->rank();
  const int world = comm->size();

  // Contiguous shards; integer bounds spread a remainder over the ranks.
  const size_t total = static_cast<size_t>(flags.samples);
  const tr::Dataset data = tr::make_shard(total, total * rank / world, total * (rank + 1) / world);

  ex::DeviceBuffer staging(flags.options.backend, (tr::kParamCount + 1) * sizeof(double));
  // Broadcast even on a fresh start: the ranks then cannot disagree on the
  // starting point, and rank 0 is the only one that needs the checkpoint.
  tr::Checkpoint state = rank == 0 ? starting_point(flags, env) : tr::Checkpoint{0, env.run_id, {}};
  state.params.resize(tr::kParamCount);
  ex::broadcast_host(*comm, staging, &state.step, 1, wk::DType::int64, 0);
  ex::broadcast_host(*comm, staging, state.params.data(), tr::kParamCount, wk::DType::float64, 0);

  // avg divides by the world size; scaling each rank's sums by world/total
  // first makes the result sum/total, the full-batch mean, for any sharding.
  const double weight = double(world) / double(total);
  std::vector<double> reduced(tr::kParamCount + 1);  // gradient, then loss
  const std::span<double> grad(reduced.data(), tr::kParamCount);
  const int64_t first_step = state.step + 1;
  const auto started = clock::now();
  for (int64_t step = first_step; step <= flags.steps; ++step) {
    if (step == flags.fail_at_step && rank == flags.fail_rank && env.restart_count == 0)
      return ex::fail_worker("train", "failed on purpose at step " + std::to_string(step) + " (--fail-at-step)");
    cxxrun_section_begin("step", flags.step_timeout);
    std::fill(reduced.begin(), reduced.end(), 0.0);
    reduced.back() = tr::loss_and_grad(state.params, data, grad);
    for (double& v : reduced) v *= weight;
    ex::allreduce_host(*comm, staging, reduced.data(), reduced.size(), wk::DType::float64, wk::ReduceOp::avg);
    for (size_t i = 0; i < tr::kParamCount; ++i) state.params[i] -= flags.lr * grad[i];
    cxxrun_heartbeat_beat();
    cxxrun_section_end("step");
    // Every rank holds the same reduced loss, so all of them stop together.
    if (!std::isfinite(reduced.back()))
      throw std::runtime_error("loss is " + std::to_string(reduced.back()) + " at step " + std::to_string(step) +
                               ": training diverged, lower --lr");

    if (rank != 0) continue;
    if (step % flags.log_every == 0 || step == flags.steps)
      std::printf("step %lld loss %.6g\n", static_cast<long long>(step), reduced.back());
    if (step % flags.checkpoint_every == 0 || step == flags.steps) {
      state.step = step;
      tr::save_checkpoint(flags.checkpoint_dir, state);
    }
  }

  double loss = tr::loss_sum(state.params, data) * weight;
  ex::allreduce_host(*comm, staging, &loss, 1, wk::DType::float64, wk::ReduceOp::avg);
  if (rank == 0) {
    const double seconds = std::chrono::duration<double>(clock::now() - started).count();
    std::printf("final loss %.17g\n", loss);
    std::printf("trained steps %lld..%lld on %d rank(s) in %.3f s\n", static_cast<long long>(first_step),
                static_cast<long long>(flags.steps), world, seconds);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  // Lines reach the launcher's log as they happen, also when a worker dies.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  Flags flags;
  CLI::App app{"Data-parallel MLP training on a seeded synthetic data set."};
  app.add_option("--steps", flags.steps, "SGD steps in all")->check(CLI::NonNegativeNumber);
  app.add_option("--lr", flags.lr, "learning rate")->check(CLI::PositiveNumber);
  app.add_option("--samples", flags.samples, "size of the whole data set")->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-every", flags.checkpoint_every, "steps between checkpoints")
      ->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-dir", flags.checkpoint_dir, "where rank 0 keeps train.ckpt");
  app.add_option("--log-every", flags.log_every, "steps between loss lines")->check(CLI::PositiveNumber);
  app.add_option("--backend", flags.options.backend, "gloo or nccl")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, wk::Backend>{{"gloo", wk::Backend::gloo}, {"nccl", wk::Backend::nccl}}));
  app.add_option("--fail-at-step", flags.fail_at_step, "fail at this step, on the first attempt only");
  app.add_option("--fail-rank", flags.fail_rank, "the rank that --fail-at-step fails");
  app.add_option("--step-timeout", flags.step_timeout, "seconds after which cxxrun reports a step as hung");
  CLI11_PARSE(app, argc, argv);
  return ex::run_worker("train", [&] { return train(flags); });
}
