// Which of torch's two TCPStore protocols a client speaks
// (docs/store-protocol.md): chosen by the client's caller (store/client.h),
// spoken by its connection (store/connection.h).
#pragma once

namespace cxxrun::store {

// modern: VALIDATE + PING handshake, torch >= 2.2 opcodes.
// legacy: torch 1.13's opcodes, no handshake.
enum class Protocol { modern, legacy };

}  // namespace cxxrun::store
