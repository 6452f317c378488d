// The model examples/train fits: a 16 -> 32 -> 1 MLP with a tanh hidden layer
// and mean squared error, trained on a synthetic regression set whose targets
// come from a fixed, smaller "teacher" MLP (so a perfect fit exists and the
// loss can fall towards zero).
//
// Everything is float64 and generated from fixed seeds with integer-only
// random bits, so every rank, every restart and every world size sees the
// same numbers, and an N-rank run reproduces the 1-rank run to rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace cxxrun::examples::train {

inline constexpr int kInputs = 16;
inline constexpr int kHidden = 32;

// Parameters as one flat array, so one allreduce moves the whole gradient:
// W1 (kHidden x kInputs, row-major), b1 (kHidden), W2 (kHidden), b2 (1).
inline constexpr size_t kParamCount = kHidden * kInputs + kHidden + kHidden + 1;

struct Dataset {
  size_t first = 0;          // index of samples[0] in the whole data set
  std::vector<double> x;     // count x kInputs
  std::vector<double> y;     // count
  size_t count() const { return y.size(); }
};

// Samples [begin, end) of the `total`-sample data set. The whole set is drawn
// in order on every rank and the rest dropped: drawing is cheap, and it keeps
// sample i the same whatever the sharding.
Dataset make_shard(size_t total, size_t begin, size_t end);

// Small random weights (seeded), zero biases.
std::vector<double> initial_params();

// Adds the gradient of 0.5 * sum over the shard of (prediction - y)^2 to
// `grad` (kParamCount) and returns that sum: sums, not means, so shards of
// any size combine into the full-batch mean by one weighted reduction.
double loss_and_grad(std::span<const double> params, const Dataset& data, std::span<double> grad);

// The same loss sum, without the gradient.
double loss_sum(std::span<const double> params, const Dataset& data);

}  // namespace cxxrun::examples::train
