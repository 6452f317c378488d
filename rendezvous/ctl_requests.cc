#include "rendezvous/ctl_requests.h"

#include <algorithm>
#include <stdexcept>

#include "rendezvous/job_board.h"
#include "store/client.h"

namespace cxxrun::rendezvous::requests {

std::string sequence_key(const std::string& run_id) { return board::prefix(run_id) + "req/seq"; }
std::string request_key(const std::string& run_id, long long n) {
  return board::prefix(run_id) + "req/" + std::to_string(n);
}
std::string answer_key(const std::string& run_id, long long n, const std::string& node) {
  return board::prefix(run_id) + "resp/" + std::to_string(n) + "/" + node;
}

long long post(store::StoreClient& client, const std::string& run_id, const std::string& request) {
  const long long n = client.add(sequence_key(run_id), 1);
  client.set(request_key(run_id, n), request);
  return n;
}

void answer(store::StoreClient& client, const std::string& run_id, long long n, const std::string& node,
            const std::string& text) {
  if (text.size() > kMaxAnswerBytes)
    throw std::invalid_argument("an answer of " + std::to_string(text.size()) + " bytes exceeds the " +
                                std::to_string(kMaxAnswerBytes) + "-byte bound");
  client.set(answer_key(run_id, n, node), text);
}

std::map<std::string, std::string> gather(store::StoreClient& client, const std::string& run_id, long long n,
                                          const std::vector<std::string>& nodes,
                                          std::chrono::steady_clock::time_point deadline) {
  using namespace std::chrono;
  std::map<std::string, std::string> got;
  std::vector<std::string> keys;
  for (const std::string& node : nodes) keys.push_back(answer_key(run_id, n, node));
  // Most answers come together: one MULTI_GET-free pass of waits, each with
  // what is left of the deadline; an answer already there returns at once.
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto left = duration_cast<milliseconds>(deadline - steady_clock::now());
    try {
      if (left.count() <= 0) {
        if (!client.check({keys[i]})) continue;
      } else {
        client.wait({keys[i]}, left);
      }
      got[nodes[i]] = client.get(keys[i]);
    } catch (const store::StoreTimeout&) {
    }
  }
  client.delete_key(request_key(run_id, n));
  for (const std::string& key : keys) client.delete_key(key);
  return got;
}

}  // namespace cxxrun::rendezvous::requests
