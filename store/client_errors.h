// What a store client (store/client.h) throws, in a header of its own so
// that the connection under the client (store/connection.h) and the callers
// that catch them need no more than this. StoreRefused and StoreAuthError
// are final: retrying cannot help, and a caller waiting for a store to come
// up stops at them.
#pragma once

#include <stdexcept>

namespace cxxrun::store {

struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct StoreTimeout : StoreError {
  using StoreError::StoreError;
};
// The server is up and answers, but will not serve this client: it dropped
// our handshake three times in a row (a store with a token, and we have
// none; a torch <= 2.0 store, and we speak the modern protocol). Retrying
// cannot help: a caller that waits for a store to come up stops at this.
struct StoreRefused : StoreError {
  using StoreError::StoreError;
};
// The token handshake failed (docs/store-protocol.md §9): the server refused
// our token, takes none while we have one, or dropped us at AUTH three times
// in a row. Retrying cannot help, so the client never does; the message
// names the authentication failure.
struct StoreAuthError : StoreRefused {
  using StoreRefused::StoreRefused;
};

}  // namespace cxxrun::store
