// The TLS settings every connection of one client shares: the CA the
// members' certificates must chain to, and our own certificate for clusters
// that require one (--client-cert-auth). Internal to etcd/.
#pragma once

#include <memory>
#include <string>

namespace boost::asio::ssl {
class context;
}

namespace cxxrun::etcd {

struct TlsFiles {
  std::string cacert;  // empty: the system's CAs
  std::string cert;    // with key: our client certificate
  std::string key;
};

class TlsContext {
 public:
  // Loads every file now, so a wrong path fails once with its name instead
  // of on each connection. Throws EtcdTlsError naming the file and why.
  explicit TlsContext(const TlsFiles& files);
  ~TlsContext();

  boost::asio::ssl::context& asio();

  // What verification used and what we presented, for error messages:
  // "cacert /x/ca.pem" or "the system's CAs"; "cert /x/c.pem" or "no client
  // certificate".
  const std::string& ca_note() const { return ca_note_; }
  const std::string& cert_note() const { return cert_note_; }

 private:
  std::unique_ptr<boost::asio::ssl::context> context_;
  std::string ca_note_;
  std::string cert_note_;
};

}  // namespace cxxrun::etcd
