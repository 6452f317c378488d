#include "agent/node_health.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/gpu_health.h"
#include "agent/hostname.h"

namespace cxxrun::agent {
namespace {

using Clock = std::chrono::steady_clock;

CheckResult from_gpu(const GpuCheck& g, std::chrono::milliseconds took) { return {g.name, g.healthy, g.detail, took}; }

void log_result(const CheckResult& r) {
  if (r.healthy)
    spdlog::info("health check {}: {} ({} ms)", r.name, r.detail, r.took.count());
  else
    spdlog::error("{} ({} ms)", failure_line(r), r.took.count());
}

}  // namespace

NodeHealth::NodeHealth(const Config& config) : options_(config.health) {
  std::string why_not;
  const char* visible = getenv("CUDA_VISIBLE_DEVICES");
  gpus_ = GpuHealth::open(visible ? std::optional<std::string>(visible) : std::nullopt, why_not);
  std::vector<std::string> what;
  if (!options_.command.empty()) what.push_back("command '" + options_.command + "'");
  for (const HealthPath& p : options_.paths)
    what.push_back("path " + p.path + (p.min_free ? " (" + byte_text(p.min_free) + " free)" : ""));
  if (gpus_) what.push_back(gpus_->describe());
  const bool rdma = check_rdma_ports().has_value();
  if (rdma) what.push_back("RDMA ports");
  empty_ = what.empty();
  if (!what.empty()) {
    std::string list = what.front();
    for (size_t i = 1; i < what.size(); ++i) list += ", " + what[i];
    spdlog::info("health checks before every round: {}{}", list, gpus_ ? "" : "; no GPU checks (" + why_not + ")");
  }
}

NodeHealth::~NodeHealth() { join(); }

void NodeHealth::join() {
  if (thread_.joinable()) thread_.join();
}

std::vector<CheckResult> NodeHealth::check(bool after_attempt) {
  std::vector<CheckResult> results;
  auto add = [&results](CheckResult r) {
    log_result(r);
    results.push_back(std::move(r));
    return results.back().healthy;
  };
  // Cheapest and most telling first; the first failure ends the round's
  // checks, since one is enough to step out.
  bool ok = true;
  if (gpus_) {
    if (after_attempt) {
      const auto start = Clock::now();
      const GpuCheck drained = gpus_->wait_memory_drained(kGpuMemoryDrainLimit, kGpuMemoryTolerance);
      ok = add(from_gpu(drained, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start)));
    }
    const auto start = Clock::now();
    for (const GpuCheck& g : gpus_->check()) {
      if (!ok) break;
      ok = add(from_gpu(g, std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start)));
    }
  }
  if (ok)
    if (auto rdma = check_rdma_ports()) ok = add(*rdma);
  for (const HealthPath& p : options_.paths)
    if (ok) ok = add(check_path(p, kPathCheckLimit));
  if (ok && !options_.command.empty()) add(check_command(options_.command, options_.command_timeout));
  std::lock_guard<std::mutex> lock(mu_);
  last_ = results;
  return results;
}

void NodeHealth::check_async(bool after_attempt, Post post, std::function<void(std::vector<CheckResult>)> then) {
  join();  // the last one posted its verdict already
  thread_ = std::thread([this, after_attempt, post = std::move(post), then = std::move(then)] {
    auto results = check(after_attempt);
    post([then, results = std::move(results)] { then(results); });
  });
}

std::vector<CheckResult> NodeHealth::last() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_;
}

const CheckResult* first_failure(const std::vector<CheckResult>& results) {
  for (const CheckResult& r : results)
    if (!r.healthy) return &r;
  return nullptr;
}

std::string failure_line(const CheckResult& failed) {
  return fmt::format("health check '{}' failed: {}", failed.name, failed.detail);
}

void exclude_this_node(const std::string& file) {
  if (file.empty()) return;
  const std::string line = this_hostname() + "\n";
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0 || ::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    spdlog::warn("cannot add {} to the exclude file {}: {}", this_hostname(), file, std::strerror(errno));
  else
    spdlog::info("added {} to the exclude file {}", this_hostname(), file);
  if (fd >= 0) ::close(fd);
}

}  // namespace cxxrun::agent
