// On-demand requests to every agent of a running job (cxxrunctl logs), made
// through the job's rendezvous store so the store's token guards them: the
// caller takes a number with ADD on the sequence key and writes the request
// under req/<n>; each agent's RequestWatcher (request_watcher.h) wakes on
// that key, the agent answers under resp/<n>/<node>, and the caller gathers
// the answers until its deadline and deletes the keys. Keys live under the
// board's prefix (job_board.h). Requests and answers are opaque text here;
// what they say is the agent's and cxxrunctl's (docs/cxxrunctl.md).
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace cxxrun::store {
class StoreClient;
}

namespace cxxrun::rendezvous::requests {

// An answer longer than this is refused by answer(): a caller gathers
// 10,000 of them.
inline constexpr size_t kMaxAnswerBytes = 64 * 1024;

std::string sequence_key(const std::string& run_id);
std::string request_key(const std::string& run_id, long long n);
std::string answer_key(const std::string& run_id, long long n, const std::string& node);

// Posts `request`; returns its number.
long long post(store::StoreClient& client, const std::string& run_id, const std::string& request);

// Stores `node`'s answer to request `n`. Throws std::invalid_argument past
// kMaxAnswerBytes.
void answer(store::StoreClient& client, const std::string& run_id, long long n, const std::string& node,
            const std::string& text);

// The answers to request `n` of `nodes` that came by `deadline` (a node
// missing from the result did not answer in time), then deletes the request
// and every answer key. Waits one node at a time, so the whole wait is
// bounded by the deadline however many nodes there are.
std::map<std::string, std::string> gather(store::StoreClient& client, const std::string& run_id, long long n,
                                          const std::vector<std::string>& nodes,
                                          std::chrono::steady_clock::time_point deadline);

}  // namespace cxxrun::rendezvous::requests
