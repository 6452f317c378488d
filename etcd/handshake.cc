#include "etcd/handshake.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include <boost/asio/error.hpp>
#include <boost/asio/ssl/error.hpp>

#include "etcd/endpoints.h"
#include "etcd/tls.h"

namespace cxxrun::etcd {
namespace {

namespace asio = boost::asio;
using Kind = TransportError::Kind;

bool is_ssl(const boost::system::error_code& ec) { return ec.category() == asio::error::get_ssl_category(); }

}  // namespace

void expect_member(ssl_st* ssl, const std::string& host) {
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
  if (is_ip_address(host)) {
    X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str());
  } else {
    X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
    SSL_set_tlsext_host_name(ssl, host.c_str());
  }
}

std::string ssl_reason(const boost::system::error_code& ec) {
  if (is_ssl(ec))
    if (const char* r = ERR_reason_error_string(static_cast<unsigned long>(ec.value()))) return r;
  return ec.message();
}

bool is_alert(const boost::system::error_code& ec) {
  return is_ssl(ec) && ssl_reason(ec).find("alert") != std::string::npos;
}

std::string closed_text(const boost::system::error_code& ec) {
  if (ec == asio::error::eof || ec == asio::ssl::error::stream_truncated) return "the member closed the connection";
  return ec.message();
}

TransportError handshake_error(const boost::system::error_code& ec, long verify, const TlsContext& tls) {
  const std::string reason = ssl_reason(ec);
  ERR_clear_error();
  if (verify != X509_V_OK)
    return TransportError(Kind::tls, false, true,
                          "TLS handshake failed: certificate verify failed: " +
                              std::string(X509_verify_cert_error_string(verify)) + " (" + tls.ca_note() + ")");
  if (is_alert(ec))
    return TransportError(Kind::tls, false, true,
                          "TLS handshake failed: the member refused it: " + reason + " (" + tls.cert_note() + ")");
  if (is_ssl(ec))
    return TransportError(
        Kind::tls, false, true,
        "TLS handshake failed: " + reason + (reason == "wrong version number" ? " (does the member serve https?)" : ""));
  // A member that serves plain http closes on our ClientHello; so does one
  // that is going down. Only the first is worth a hint, and both retry.
  const bool closed =
      ec == asio::error::eof || ec == asio::ssl::error::stream_truncated || ec == asio::error::connection_reset;
  return TransportError(Kind::unreachable, false, false,
                        "TLS handshake broke off: " + closed_text(ec) + (closed ? " (does the member serve https?)" : ""));
}

}  // namespace cxxrun::etcd
