#include "worker_runtime/gloo_store.h"

#include <algorithm>

namespace cxxrun::worker {

using std::chrono::milliseconds;

GlooStore::GlooStore(store::StoreClient& client, Clock::time_point deadline)
    : client_(client), deadline_(deadline) {}

milliseconds GlooStore::remaining(milliseconds cap) const {
  auto left = std::chrono::duration_cast<milliseconds>(deadline_ - Clock::now());
  // At least 1 ms: a zero timeout may mean "no timeout" to a server.
  return std::clamp(left, milliseconds(1), std::max(cap, milliseconds(1)));
}

void GlooStore::set(const std::string& key, const std::vector<char>& data) {
  // The client bounds set() by its own Options::timeout, the same budget.
  client_.set(key, std::string(data.begin(), data.end()));
}

std::vector<char> GlooStore::get(const std::string& key) {
  std::string value = client_.get(key, remaining(milliseconds::max()));
  return std::vector<char>(value.begin(), value.end());
}

void GlooStore::wait(const std::vector<std::string>& keys) { client_.wait(keys, remaining(milliseconds::max())); }

void GlooStore::wait(const std::vector<std::string>& keys, const milliseconds& timeout) {
  client_.wait(keys, remaining(timeout));
}

}  // namespace cxxrun::worker
