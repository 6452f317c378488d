// Feeds arbitrary bytes to the store's request parser the way the server
// does, and applies what parses to a StoreState. Beyond "no crash, no
// sanitizer report" it checks that parsing is independent of how the bytes
// were split into reads, and the parser's promises about consumed/needed.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "store/request.h"
#include "store/state.h"
#include "store/wire.h"

using namespace cxxrun::store;

namespace {

void require(bool ok) {
  if (!ok) __builtin_trap();
}

struct Run {
  std::vector<StoreRequest> requests;
  RequestParse::Status end = RequestParse::Status::need_more;
};

bool same(const StoreRequest& a, const StoreRequest& b) {
  return a.command == b.command && a.keys == b.keys && a.values == b.values && a.delta == b.delta &&
         a.nonce == b.nonce;
}

// The server's loop: bytes arrive `chunk` at a time; parse only once the
// buffer holds what the last need_more asked for.
Run parse_stream(std::string_view stream, OpTable table, size_t chunk) {
  Run run;
  std::string buffer;
  size_t needed = 1;
  size_t fed = 0;
  while (true) {
    if (buffer.size() < needed) {
      if (fed == stream.size()) return run;
      size_t n = std::min(chunk, stream.size() - fed);
      buffer.append(stream.substr(fed, n));
      fed += n;
      continue;
    }
    RequestParse p = parse_request(buffer, table);
    require(!(table != OpTable::unknown && p.table != table));
    table = p.table;
    if (p.status == RequestParse::Status::error) {
      require(!p.error.empty());
      run.end = p.status;
      return run;
    }
    if (p.status == RequestParse::Status::need_more) {
      require(p.needed > buffer.size() && p.needed <= wire::kMaxRequestBytes);
      needed = p.needed;
      continue;
    }
    require(p.consumed > 0 && p.consumed <= buffer.size());
    buffer.erase(0, p.consumed);
    needed = 1;
    run.requests.push_back(std::move(p.request));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The first byte picks the starting table and the read size.
  auto table = static_cast<OpTable>(data[0] % 3);
  size_t chunk = 1 + (data[0] >> 2);
  std::string_view stream(reinterpret_cast<const char*>(data + 1), size - 1);

  Run whole = parse_stream(stream, table, stream.size() + 1);
  Run pieces = parse_stream(stream, table, chunk);
  require(whole.end == pieces.end && whole.requests.size() == pieces.requests.size());
  for (size_t i = 0; i < whole.requests.size(); ++i) require(same(whole.requests[i], pieces.requests[i]));

  // Three clients take turns; the fourth request of each round disconnects one.
  StoreState state;
  OpTable effective = table == OpTable::unknown ? OpTable::legacy : table;
  for (size_t i = 0; i < whole.requests.size(); ++i) {
    StoreState::ClientId client = i % 3;
    StoreState::Outcome outcome = state.apply(client, effective, whole.requests[i]);
    require(!outcome.close || !outcome.error.empty());
    if (outcome.close || i % 4 == 3) state.disconnect(client);
  }
  return 0;
}
