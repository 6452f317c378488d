#include "rendezvous/job_board.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "store/client.h"

namespace cxxrun::rendezvous::board {
namespace {

std::string index_key(const std::string& run_id) { return prefix(run_id) + "index"; }
std::string record_key(const std::string& run_id, const std::string& node) { return prefix(run_id) + "node/" + node; }
std::string stop_key(const std::string& run_id) { return prefix(run_id) + "stop"; }

}  // namespace

std::string prefix(const std::string& run_id) { return "cxxrun/rdzv/" + run_id + "/board/"; }

void publish(store::StoreClient& client, const std::string& run_id, const std::string& node,
             const std::string& record, bool first) {
  if (record.size() > kMaxRecordBytes)
    throw std::invalid_argument("a board record of " + std::to_string(record.size()) + " bytes exceeds the " +
                                std::to_string(kMaxRecordBytes) + "-byte bound");
  if (node.empty() || node.find('\n') != std::string::npos)
    throw std::invalid_argument("a board node id must be one non-empty line");
  client.set(record_key(run_id, node), record);
  if (first) client.append(index_key(run_id), node + "\n");
}

std::vector<std::pair<std::string, std::string>> read(store::StoreClient& client, const std::string& run_id) {
  const std::optional<std::string> index = client.get_if_set(index_key(run_id));
  std::vector<std::string> nodes;
  if (index) {
    std::set<std::string> seen;
    size_t start = 0;
    while (start < index->size()) {
      size_t end = index->find('\n', start);
      if (end == std::string::npos) end = index->size();
      std::string node = index->substr(start, end - start);
      if (!node.empty() && seen.insert(node).second) nodes.push_back(std::move(node));
      start = end + 1;
    }
  }
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(nodes.size());
  for (size_t at = 0; at < nodes.size(); at += kReadChunk) {
    std::vector<std::string> keys;
    for (size_t i = at; i < std::min(nodes.size(), at + kReadChunk); ++i) keys.push_back(record_key(run_id, nodes[i]));
    std::vector<std::string> values = client.multi_get(keys);
    for (size_t i = 0; i < values.size(); ++i) out.emplace_back(nodes[at + i], std::move(values[i]));
  }
  return out;
}

void request_stop(store::StoreClient& client, const std::string& run_id, const StopRequest& request) {
  client.set(stop_key(run_id), std::to_string(request.at_ms) + " " + request.why);
}

std::optional<StopRequest> stop_requested(store::StoreClient& client, const std::string& run_id) {
  const std::optional<std::string> text = client.get_if_set(stop_key(run_id));
  if (!text) return std::nullopt;
  StopRequest r;
  const size_t space = text->find(' ');
  try {
    r.at_ms = std::stoll(text->substr(0, space));
  } catch (const std::exception&) {
    r.at_ms = 0;
  }
  if (space != std::string::npos) r.why = text->substr(space + 1);
  return r;
}

}  // namespace cxxrun::rendezvous::board
