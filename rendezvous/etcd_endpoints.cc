#include "rendezvous/etcd_endpoints.h"

#include <stdexcept>

#include "etcd/endpoints.h"
#include "etcd/errors.h"

namespace cxxrun::rendezvous {

std::string EtcdEndpoint::text() const { return etcd::Endpoint{host, port}.text(); }

std::vector<EtcdEndpoint> parse_etcd_endpoints(const std::vector<std::string>& entries, bool https) {
  std::vector<etcd::Endpoint> parsed;
  try {
    parsed = etcd::parse_endpoints(entries, https ? etcd::Protocol::https : etcd::Protocol::http);
  } catch (const etcd::EtcdError& e) {
    throw std::invalid_argument(e.what());  // the same line: bad input, not a failure of etcd's
  }
  std::vector<EtcdEndpoint> out;
  out.reserve(parsed.size());
  for (const etcd::Endpoint& e : parsed) out.push_back({e.host, e.port});
  return out;
}

}  // namespace cxxrun::rendezvous
