// TLS toward a member: the checks a handshake makes of the member's
// certificate, and the words for what failed (a refused certificate, a
// member that serves plain http).
// Internal to etcd/.
#pragma once

#include <boost/system/error_code.hpp>
#include <string>

#include "etcd/grpc_call.h"

struct ssl_st;

namespace cxxrun::etcd {

class TlsContext;

// What etcd's Go clients do, set on the SSL object before its handshake:
// the certificate must name the host we dialled, as an IP SAN when we
// dialled an address and a DNS SAN otherwise; SNI carries names only.
void expect_member(ssl_st* ssl, const std::string& host);

// OpenSSL's reason for a TLS error ("certificate verify failed"), or the
// error's own message for any other.
std::string ssl_reason(const boost::system::error_code& ec);

// The member rejected our handshake (e.g. "tlsv13 alert certificate
// required"). With TLS 1.3 the client's side of the handshake completes
// before the server has judged our certificate, so this can arrive on the
// first read, after the request went out; it was refused all the same.
bool is_alert(const boost::system::error_code& ec);

// "the member closed the connection" for an end of stream (TLS's included),
// the error's message otherwise.
std::string closed_text(const boost::system::error_code& ec);

// The error for a handshake that failed with `ec`; `verify` is
// SSL_get_verify_result's. A refusal (ours or the member's) is permanent; a
// handshake that broke off may be a member going down and is not.
TransportError handshake_error(const boost::system::error_code& ec, long verify, const TlsContext& tls);

}  // namespace cxxrun::etcd
