#include "etcd/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>

#include "etcd/errors.h"

namespace cxxrun::etcd {
namespace {

// OpenSSL's own reason ("no such file", "PEM lib", "key values mismatch"),
// without asio's " (SSL routines)" tail.
std::string reason(const boost::system::error_code& ec) {
  if (ec.category() == boost::asio::error::get_ssl_category()) {
    if (const char* r = ERR_reason_error_string(static_cast<unsigned long>(ec.value()))) return r;
  }
  return ec.message();
}

}  // namespace

TlsContext::TlsContext(const TlsFiles& files)
    : context_(std::make_unique<boost::asio::ssl::context>(boost::asio::ssl::context::tls_client)) {
  namespace ssl = boost::asio::ssl;
  boost::system::error_code ec;
  // etcd takes nothing older than TLS 1.2 either.
  SSL_CTX_set_min_proto_version(context_->native_handle(), TLS1_2_VERSION);
  context_->set_verify_mode(ssl::verify_peer, ec);
  if (!files.cacert.empty()) {
    if (context_->load_verify_file(files.cacert, ec); ec)
      throw EtcdTlsError("etcd: cannot load cacert " + files.cacert + ": " + reason(ec));
    ca_note_ = "cacert " + files.cacert;
  } else {
    if (context_->set_default_verify_paths(ec); ec)
      throw EtcdTlsError("etcd: cannot load the system's CA certificates: " + reason(ec));
    ca_note_ = "the system's CAs";
  }
  if (files.cert.empty() != files.key.empty())
    throw EtcdTlsError("etcd: a client certificate needs both cert and key (got only " +
                       std::string(files.cert.empty() ? "key " + files.key : "cert " + files.cert) + ")");
  cert_note_ = "no client certificate";
  if (!files.cert.empty()) {
    if (context_->use_certificate_chain_file(files.cert, ec); ec)
      throw EtcdTlsError("etcd: cannot load cert " + files.cert + ": " + reason(ec));
    if (context_->use_private_key_file(files.key, ssl::context::pem, ec); ec)
      throw EtcdTlsError("etcd: cannot load key " + files.key + ": " + reason(ec));
    if (SSL_CTX_check_private_key(context_->native_handle()) != 1) {
      ERR_clear_error();
      throw EtcdTlsError("etcd: key " + files.key + " does not match cert " + files.cert);
    }
    cert_note_ = "cert " + files.cert;
  }
}

TlsContext::~TlsContext() = default;

boost::asio::ssl::context& TlsContext::asio() { return *context_; }

}  // namespace cxxrun::etcd
