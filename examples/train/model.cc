#include "examples/train/model.h"

#include <cmath>
#include <stdexcept>

namespace cxxrun::examples::train {

namespace {

constexpr int kTeacherHidden = 4;
constexpr uint64_t kDataSeed = 0x5eed'da7a;
constexpr uint64_t kTeacherSeed = 0x7eac'4e25;
constexpr uint64_t kInitSeed = 0x1417'0042;

// splitmix64: fully specified, unlike std::uniform_real_distribution, whose
// output differs between standard libraries.
struct Random {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-scale, scale).
  double symmetric(double scale) { return ((next() >> 11) * 0x1.0p-53 * 2.0 - 1.0) * scale; }
};

struct Teacher {
  double u[kTeacherHidden][kInputs];
  double c[kTeacherHidden];
  double v[kTeacherHidden];

  Teacher() {
    Random r{kTeacherSeed};
    for (auto& row : u)
      for (double& w : row) w = r.symmetric(1.0);
    for (double& b : c) b = r.symmetric(0.5);
    for (double& w : v) w = r.symmetric(1.0);
  }

  double operator()(const double* x) const {
    double out = 0;
    for (int j = 0; j < kTeacherHidden; ++j) {
      double z = c[j];
      for (int i = 0; i < kInputs; ++i) z += u[j][i] * x[i];
      out += v[j] * std::tanh(z);
    }
    return out;
  }
};

// Offsets of the parameter blocks in the flat array.
constexpr size_t kB1 = kHidden * kInputs;
constexpr size_t kW2 = kB1 + kHidden;
constexpr size_t kB2 = kW2 + kHidden;

// Forward pass of one sample; fills the hidden activations, returns the output.
double forward(const double* p, const double* x, double* h) {
  double out = p[kB2];
  for (int j = 0; j < kHidden; ++j) {
    const double* w = p + j * kInputs;
    double z = p[kB1 + j];
    for (int i = 0; i < kInputs; ++i) z += w[i] * x[i];
    h[j] = std::tanh(z);
    out += p[kW2 + j] * h[j];
  }
  return out;
}

void check_params(std::span<const double> params) {
  if (params.size() != kParamCount) throw std::invalid_argument("train: wrong parameter count");
}

}  // namespace

Dataset make_shard(size_t total, size_t begin, size_t end) {
  if (begin > end || end > total) throw std::invalid_argument("train: bad shard bounds");
  const Teacher teacher;
  Random r{kDataSeed};
  Dataset d;
  d.first = begin;
  d.x.reserve((end - begin) * kInputs);
  d.y.reserve(end - begin);
  double x[kInputs];
  for (size_t s = 0; s < end; ++s) {
    for (double& v : x) v = r.symmetric(1.0);
    if (s < begin) continue;
    d.x.insert(d.x.end(), x, x + kInputs);
    d.y.push_back(teacher(x));
  }
  return d;
}

std::vector<double> initial_params() {
  std::vector<double> p(kParamCount, 0.0);
  Random r{kInitSeed};
  // Uniform with variance 1/fan_in keeps tanh out of saturation at the start.
  const double in_scale = std::sqrt(3.0 / kInputs);
  const double out_scale = std::sqrt(3.0 / kHidden);
  for (size_t i = 0; i < kB1; ++i) p[i] = r.symmetric(in_scale);
  for (size_t i = kW2; i < kB2; ++i) p[i] = r.symmetric(out_scale);
  return p;
}

double loss_and_grad(std::span<const double> params, const Dataset& data, std::span<double> grad) {
  check_params(params);
  check_params(grad);
  const double* p = params.data();
  double* g = grad.data();
  double h[kHidden];
  double loss = 0;
  for (size_t s = 0; s < data.count(); ++s) {
    const double* x = &data.x[s * kInputs];
    const double e = forward(p, x, h) - data.y[s];
    loss += 0.5 * e * e;
    g[kB2] += e;
    for (int j = 0; j < kHidden; ++j) {
      g[kW2 + j] += e * h[j];
      const double dz = e * p[kW2 + j] * (1.0 - h[j] * h[j]);
      g[kB1 + j] += dz;
      double* gw = g + j * kInputs;
      for (int i = 0; i < kInputs; ++i) gw[i] += dz * x[i];
    }
  }
  return loss;
}

double loss_sum(std::span<const double> params, const Dataset& data) {
  check_params(params);
  double h[kHidden];
  double loss = 0;
  for (size_t s = 0; s < data.count(); ++s) {
    const double e = forward(params.data(), &data.x[s * kInputs], h) - data.y[s];
    loss += 0.5 * e * e;
  }
  return loss;
}

}  // namespace cxxrun::examples::train
