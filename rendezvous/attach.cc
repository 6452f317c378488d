#include "rendezvous/attach.h"

#include "net/endpoint.h"
#include "rendezvous/etcd_store.h"

namespace cxxrun::rendezvous {

std::unique_ptr<store::StoreClient> attach(const RendezvousConfig& config, std::chrono::milliseconds timeout) {
  const RendezvousSettings& s = config.settings;
  switch (config.backend) {
    case Backend::local:
    case Backend::static_tcp:
      throw RendezvousError("a job with the " + std::string(config.backend == Backend::local ? "local" : "static") +
                            " rendezvous has no rendezvous store to attach to (cxxrunctl needs --rdzv-backend=c10d "
                            "or etcd-v3)");
    case Backend::c10d: {
      const std::string where = net::format_endpoint({config.host, config.port});
      store::StoreClient::Options o;
      o.host = config.host;
      o.port = config.port;
      o.timeout = timeout;
      o.token = s.token;
      try {
        return store::StoreClient::connect(o);
      } catch (const store::StoreRefused& e) {
        throw AttachRefused("the rendezvous store of job=" + s.run_id + " at " + where + " refused this client: " +
                            e.what() + (s.token.empty() ? " (the job has a token: give it with --token-file)"
                                                        : " (is --token-file the job's token?)"));
      } catch (const store::StoreError& e) {
        throw RendezvousError("cannot reach the rendezvous store of job=" + s.run_id + " at " + where + ": " +
                              e.what());
      }
    }
    case Backend::etcd: {
      try {
        return std::make_unique<EtcdStore>(s.etcd, timeout);
      } catch (const store::StoreRefused& e) {
        throw AttachRefused("etcd refused this client for job=" + s.run_id + " at " + s.endpoint + ": " + e.what());
      } catch (const store::StoreError& e) {
        throw RendezvousError("cannot reach etcd for job=" + s.run_id + " at " + s.endpoint + ": " + e.what());
      }
    }
  }
  throw RendezvousError("unknown rendezvous backend");
}

}  // namespace cxxrun::rendezvous
