// etcd_client_probe [connection options] COMMAND ARGS...
//
// Exposes the etcd client (etcd/client.h, etcd/watch.h) to the Python tests
// (tests/integration/test_etcd_client.py), one small command at a time, with
// output a test can parse: one line per result, flushed at once.
//
// Connection options: --endpoints LIST (required), --protocol http|https,
// --cacert F, --cert F, --key F, --user U, --password P, --timeout-ms N.
//
// Commands (keys and values are plain text here):
//   put KEY VALUE [LEASE]      revision=R endpoint=E
//   get KEY                    value=V mod=M create=C version=N lease=L revision=R | absent revision=R
//   get-prefix PREFIX          count=N revision=R, then KEY=VALUE mod=M per key
//   delete KEY | delete-prefix PREFIX                     deleted=N
//   txn-cas KEY EXPECTED NEW   EXPECTED "-" means absent:  succeeded revision=R | failed current=V
//   lease-grant TTL            lease=ID ttl=T
//   lease-keepalive ID         ttl=T
//   lease-revoke ID            revoked | absent
//   put-leased KEY VALUE TTL   lease=ID ttl=T revision=R
//   watch KEY [--prefix] [--from REV] [--count N] [--idle-ms MS]
//                              "created endpoint=E revision=R", then per event
//                              "PUT key value mod=M" | "DELETE key mod=M", and
//                              "connected endpoint=E" whenever the stream moved.
//                              Exit 0 after N events, 3 when MS pass without one.
//   watch-cancel KEY MS        another thread cancels after MS: "cancelled after=T"
//   store-wait PREFIX MS KEY...  the rendezvous's EtcdStore (rendezvous/etcd_store.h)
//                              under PREFIX waits at most MS for every KEY:
//                              "ready ms=T", or StoreTimeout (exit 1)
//   loop                       one command per stdin line (no watch); each answer
//                              "ok ..." or "error Class: message"; the same client
//                              throughout, so keep-alive and failover persist.
//
// A failure prints "etcd_client_probe: Class: message" on stderr (one line)
// and exits 1; a usage error exits 2.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "etcd/client.h"
#include "etcd/watch.h"
#include "rendezvous/etcd_store.h"
#include "store/client.h"

using namespace cxxrun::etcd;
using Clock = std::chrono::steady_clock;

namespace {

struct Usage : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string class_of(const std::exception& e) {
  if (dynamic_cast<const EtcdTlsError*>(&e)) return "EtcdTlsError";
  if (dynamic_cast<const EtcdUnavailable*>(&e)) return "EtcdUnavailable";
  if (dynamic_cast<const EtcdTimeout*>(&e)) return "EtcdTimeout";
  if (dynamic_cast<const EtcdAuthError*>(&e)) return "EtcdAuthError";
  if (dynamic_cast<const EtcdIndeterminate*>(&e)) return "EtcdIndeterminate";
  if (dynamic_cast<const EtcdRequestError*>(&e)) return "EtcdRequestError";
  if (dynamic_cast<const EtcdCompacted*>(&e)) return "EtcdCompacted";
  if (dynamic_cast<const EtcdError*>(&e)) return "EtcdError";
  if (dynamic_cast<const cxxrun::store::StoreTimeout*>(&e)) return "StoreTimeout";
  if (dynamic_cast<const cxxrun::store::StoreError*>(&e)) return "StoreError";
  return "std::exception";
}

int64_t number(const std::string& text) {
  try {
    size_t used = 0;
    int64_t n = std::stoll(text, &used);
    if (used == text.size()) return n;
  } catch (const std::exception&) {
  }
  throw Usage("not a number: " + text);
}

std::string describe(const KeyValue& kv) {
  return "value=" + kv.value + " mod=" + std::to_string(kv.mod_revision) +
         " create=" + std::to_string(kv.create_revision) + " version=" + std::to_string(kv.version) +
         " lease=" + std::to_string(kv.lease);
}

void need(const std::vector<std::string>& args, size_t n, const char* usage) {
  if (args.size() != n) throw Usage(std::string("usage: ") + usage);
}

// One unary command against `client`; its answer without the trailing newline.
std::string run_command(Client& client, const std::vector<std::string>& args) {
  if (args.empty()) throw Usage("no command");
  const std::string& cmd = args[0];
  if (cmd == "put") {
    if (args.size() != 3 && args.size() != 4) throw Usage("usage: put KEY VALUE [LEASE]");
    int64_t rev = client.put(args[1], args[2], args.size() == 4 ? number(args[3]) : 0);
    return "revision=" + std::to_string(rev) + " endpoint=" + client.endpoint();
  }
  if (cmd == "get") {
    need(args, 2, "get KEY");
    auto r = client.range(args[1]);
    return (r.kv ? describe(*r.kv) : "absent") + " revision=" + std::to_string(r.revision);
  }
  if (cmd == "get-prefix") {
    need(args, 2, "get-prefix PREFIX");
    auto r = client.range_prefix(args[1]);
    std::string out = "count=" + std::to_string(r.kvs.size()) + " revision=" + std::to_string(r.revision);
    for (const auto& kv : r.kvs) out += "\n" + kv.key + "=" + kv.value + " mod=" + std::to_string(kv.mod_revision);
    return out;
  }
  if (cmd == "delete" || cmd == "delete-prefix") {
    need(args, 2, "delete KEY | delete-prefix PREFIX");
    return "deleted=" + std::to_string(cmd == "delete" ? client.delete_range(args[1]) : client.delete_prefix(args[1]));
  }
  if (cmd == "txn-cas") {
    need(args, 4, "txn-cas KEY EXPECTED|- NEW");
    const auto& key = args[1];
    auto compare = args[2] == "-" ? Compare::create_revision_is(key, Compare::Result::equal, 0)
                                  : Compare::value_is(key, Compare::Result::equal, args[2]);
    auto r = client.txn({compare}, {Op::put(key, args[3]), Op::get(key)}, {Op::get(key)});
    if (r.succeeded) return "succeeded revision=" + std::to_string(r.revision);
    const auto& kvs = r.responses.at(0).kvs;
    return "failed current=" + (kvs.empty() ? std::string("-") : kvs[0].value);
  }
  if (cmd == "lease-grant") {
    need(args, 2, "lease-grant TTL");
    auto lease = client.lease_grant(number(args[1]));
    return "lease=" + std::to_string(lease.id) + " ttl=" + std::to_string(lease.ttl);
  }
  if (cmd == "lease-keepalive") {
    need(args, 2, "lease-keepalive ID");
    return "ttl=" + std::to_string(client.lease_keep_alive(number(args[1])));
  }
  if (cmd == "lease-revoke") {
    need(args, 2, "lease-revoke ID");
    return client.lease_revoke(number(args[1])) ? "revoked" : "absent";
  }
  if (cmd == "put-leased") {
    need(args, 4, "put-leased KEY VALUE TTL");
    auto lease = client.lease_grant(number(args[3]));
    int64_t rev = client.put(args[1], args[2], lease.id);
    return "lease=" + std::to_string(lease.id) + " ttl=" + std::to_string(lease.ttl) +
           " revision=" + std::to_string(rev);
  }
  if (cmd == "endpoint") return "endpoint=" + client.endpoint();
  throw Usage("unknown command: " + cmd);
}

int watch(const Options& options, const std::vector<std::string>& args) {
  if (args.size() < 2) throw Usage("usage: watch KEY [--prefix] [--from REV] [--count N] [--idle-ms MS]");
  auto scope = Watch::Scope::key;
  int64_t from = 0, count = 1, idle_ms = 10000;
  for (size_t i = 2; i < args.size(); ++i) {
    if (args[i] == "--prefix") scope = Watch::Scope::prefix;
    else if (args[i] == "--from" && i + 1 < args.size()) from = number(args[++i]);
    else if (args[i] == "--count" && i + 1 < args.size()) count = number(args[++i]);
    else if (args[i] == "--idle-ms" && i + 1 < args.size()) idle_ms = number(args[++i]);
    else throw Usage("watch: unknown argument " + args[i]);
  }
  Watch w(options, args[1], scope, from);
  std::string endpoint = w.endpoint();
  std::cout << "created endpoint=" << endpoint << " revision=" << w.revision() << std::endl;
  int64_t seen = 0;
  while (seen < count) {
    auto events = w.next(std::chrono::milliseconds(idle_ms));
    if (!events) {
      std::cout << "idle after " << seen << " events" << std::endl;
      return 3;
    }
    if (w.endpoint() != endpoint) {
      endpoint = w.endpoint();
      std::cout << "connected endpoint=" << endpoint << std::endl;
    }
    for (const auto& e : *events) {
      bool put = e.type == WatchEvent::Type::put;
      std::cout << (put ? "PUT " : "DELETE ") << e.kv.key << (put ? " " + e.kv.value : std::string())
                << " mod=" << e.kv.mod_revision << std::endl;
      ++seen;
    }
  }
  return 0;
}

int watch_cancel(const Options& options, const std::vector<std::string>& args) {
  need(args, 3, "watch-cancel KEY MS");
  Watch w(options, args[1]);
  auto after = std::chrono::milliseconds(number(args[2]));
  auto start = Clock::now();
  std::thread canceller([&] {
    std::this_thread::sleep_for(after);
    w.cancel();
  });
  auto events = w.next(std::chrono::seconds(30));  // far beyond `after`: only cancel() ends it in time
  canceller.join();
  auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  if (events) throw Usage("watch-cancel: an event arrived instead");
  bool again = !w.next(std::chrono::seconds(30)).has_value();  // stays cancelled, returns at once
  auto total = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
  std::cout << "cancelled after=" << took << " again=" << (again ? "nullopt" : "events") << " total=" << total
            << std::endl;
  return 0;
}

int store_wait(const Options& options, const std::vector<std::string>& args) {
  if (args.size() < 4) throw Usage("usage: store-wait PREFIX MS KEY...");
  cxxrun::rendezvous::EtcdSettings settings;
  for (const auto& e : options.endpoints) settings.endpoints.push_back({e.host, e.port});
  settings.prefix = args[1];
  const auto timeout = std::chrono::milliseconds(number(args[2]));
  cxxrun::rendezvous::EtcdStore store(settings, timeout);
  const auto start = Clock::now();
  store.wait({args.begin() + 3, args.end()}, timeout);
  std::cout << "ready ms="
            << std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count() << std::endl;
  return 0;
}

int loop(Client& client) {
  std::string line;
  while (std::getline(std::cin, line)) {
    std::istringstream words(line);
    std::vector<std::string> args;
    for (std::string w; words >> w;) args.push_back(w);
    if (args.empty()) continue;
    auto start = Clock::now();
    try {
      std::string answer = run_command(client, args);
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      std::cout << "ok " << answer << " ms=" << ms << std::endl;
    } catch (const Usage& e) {
      std::cout << "error Usage: " << e.what() << std::endl;
    } catch (const std::exception& e) {
      std::cout << "error " << class_of(e) << ": " << e.what() << std::endl;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  auto logger = spdlog::stderr_color_mt("etcd_client_probe");
  spdlog::set_default_logger(logger);
  const char* level = std::getenv("ETCD_PROBE_LOG");
  spdlog::set_level(spdlog::level::from_str(level ? level : "warn"));

  Options options;
  std::vector<std::string> endpoints;
  std::vector<std::string> args;
  try {
    for (int i = 1; i < argc; ++i) {
      std::string a = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) throw Usage(a + " needs a value");
        return argv[++i];
      };
      if (!args.empty()) args.push_back(a);  // after the command everything is its own
      else if (a == "--endpoints") endpoints.push_back(value());
      else if (a == "--protocol") {
        auto p = value();
        if (p != "http" && p != "https") throw Usage("--protocol http|https");
        options.protocol = p == "https" ? Protocol::https : Protocol::http;
      } else if (a == "--cacert") options.cacert = value();
      else if (a == "--cert") options.cert = value();
      else if (a == "--key") options.key = value();
      else if (a == "--user") options.username = value();
      else if (a == "--password") options.password = value();
      else if (a == "--timeout-ms") options.timeout = std::chrono::milliseconds(number(value()));
      else if (a.rfind("--", 0) == 0) throw Usage("unknown option " + a);
      else args.push_back(a);
    }
    if (endpoints.empty() || args.empty()) throw Usage("usage: etcd_client_probe --endpoints LIST [...] COMMAND ARGS");
    options.endpoints = cxxrun::etcd::parse_endpoints(endpoints, options.protocol);
    if (args[0] == "watch") return watch(options, args);
    if (args[0] == "watch-cancel") return watch_cancel(options, args);
    if (args[0] == "store-wait") return store_wait(options, args);
    Client client(options);
    if (args[0] == "loop") return loop(client);
    std::cout << run_command(client, args) << std::endl;
    return 0;
  } catch (const Usage& e) {
    std::cerr << "etcd_client_probe: " << e.what() << std::endl;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "etcd_client_probe: " << class_of(e) << ": " << e.what() << std::endl;
    return 1;
  }
}
