#include "rendezvous/etcd_calls.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <thread>

#include "etcd/errors.h"
#include "etcd/options.h"

namespace cxxrun::rendezvous {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

milliseconds remaining(Clock::time_point deadline) {
  return std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

etcd::Options etcd_options(const EtcdSettings& settings, milliseconds timeout) {
  // Every node lists the same members, and each asked the first: at 1,000
  // agents that member's gateway served every request while the others
  // idled (bench/RESULTS.md, issue 45). Each process starts at a member of
  // its own, by its host and pid, as etcd's clients spread theirs; its
  // watches go where its calls do.
  static const size_t first = [] {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    return std::hash<std::string>{}(host) ^ (static_cast<size_t>(getpid()) * 0x9e3779b97f4a7c15ULL);
  }();
  return etcd_options(settings, timeout, first);
}

etcd::Options etcd_options(const EtcdSettings& settings, milliseconds timeout, size_t first) {
  etcd::Options o;
  o.endpoints.clear();  // etcd's default is a member on this host: only the settings' count
  const size_t n = settings.endpoints.size();
  for (size_t i = 0; i < n; ++i) {
    const EtcdEndpoint& e = settings.endpoints[(first + i) % n];
    o.endpoints.push_back({e.host, e.port});
  }
  o.protocol = settings.https ? etcd::Protocol::https : etcd::Protocol::http;
  o.cacert = settings.cacert;
  o.cert = settings.cert;
  o.key = settings.key;
  o.username = settings.username;
  o.password = settings.password;
  o.timeout = timeout;
  return o;
}

void resend_while_indeterminate(Clock::time_point deadline, const std::function<void(milliseconds)>& write) {
  milliseconds pause(20);
  for (;;) {
    try {
      return write(remaining(deadline));
    } catch (const etcd::EtcdIndeterminate& e) {
      if (Clock::now() >= deadline) throw etcd::EtcdTimeout(e.what());
      spdlog::debug("etcd: {}; sending it again", e.what());
    }
    std::this_thread::sleep_until(std::min(deadline, Clock::now() + pause));
    pause = std::min(pause * 2, milliseconds(500));
  }
}

}  // namespace cxxrun::rendezvous
