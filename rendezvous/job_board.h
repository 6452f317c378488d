// The job board: where every agent of a running job says what it is doing,
// in the job's rendezvous store, so that one reader (cxxrunctl) sees the
// whole job without asking any agent. One record per node under a key of
// its own (cxxrun/rdzv/<run_id>/board/<node>), an append-only index of the
// node ids (a TCPStore cannot list its keys), and the job's stop request.
// Everything here is a call on a store client, so the store's token guards
// it: a reader without the token cannot connect, let alone read or stop.
//
// The record itself is the agent's (agent/report/board_record.h); this
// header only stores and fetches opaque bounded strings.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace cxxrun::store {
class StoreClient;
}

namespace cxxrun::rendezvous::board {

// A record larger than this is refused by publish(): a reader of 10,000
// nodes fetches at most kReadChunk of them per request, and each request's
// reply must stay far below the store's limit (store/wire.h).
inline constexpr size_t kMaxRecordBytes = 16 * 1024;
// How many records one MULTI_GET fetches: 1,000 * 16 KiB stays under 16 MiB.
inline constexpr size_t kReadChunk = 1000;

// The key prefix of job `run_id`'s board.
std::string prefix(const std::string& run_id);

// Stores `node`'s record; `first`: this node's first record in this store,
// when its id joins the index (after the record, so every indexed node has
// one). Throws std::invalid_argument for a record over kMaxRecordBytes or
// a node id with '\n', store::StoreError as the client does.
void publish(store::StoreClient& client, const std::string& run_id, const std::string& node,
             const std::string& record, bool first);

// Every node's last record, in the order the nodes first published (a node
// indexed twice is listed once). Reads the index, then the records in
// chunks of kReadChunk. Empty when no node has published.
std::vector<std::pair<std::string, std::string>> read(store::StoreClient& client, const std::string& run_id);

// cxxrunctl stop: asks every agent to stop the job as on SIGTERM. The
// request is stamped with `at_ms` (the wall clock, ms since the epoch), so
// an agent of a later job under the same id, on a store that outlived the
// first (cxxrun-rdzv, etcd), ignores it; `why` is the line agents log.
struct StopRequest {
  long long at_ms = 0;
  std::string why;
};
void request_stop(store::StoreClient& client, const std::string& run_id, const StopRequest& request);
// The stop request, when one was made.
std::optional<StopRequest> stop_requested(store::StoreClient& client, const std::string& run_id);

}  // namespace cxxrun::rendezvous::board
