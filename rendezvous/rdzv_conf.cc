// --rdzv-conf keys (docs/torchrun-compat.md §4) into RendezvousSettings.
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <stdexcept>

#include "rendezvous/rendezvous.h"
#include "store/auth.h"

namespace cxxrun::rendezvous {
namespace {

std::chrono::milliseconds seconds_value(const std::string& key, const std::string& value) {
  size_t used = 0;
  double secs = 0;
  try {
    secs = std::stod(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || !std::isfinite(secs) || secs <= 0)
    throw std::invalid_argument("--rdzv-conf " + key + "=" + value + ": the " + key +
                                " must be a positive number of seconds");
  return std::chrono::milliseconds(static_cast<long long>(std::llround(secs * 1000)));
}

int positive_int(const std::string& key, const std::string& value) {
  size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != value.size() || n <= 0)
    throw std::invalid_argument("--rdzv-conf " + key + "=" + value + ": must be a positive integer");
  return n;
}

// torch's get_as_bool spellings.
std::string bool_value(const std::string& key, const std::string& value) {
  std::string v;
  for (char c : value) v.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
  static const std::set<std::string> yes{"1", "true", "t", "yes", "y"}, no{"0", "false", "f", "no", "n"};
  if (yes.count(v)) return "true";
  if (no.count(v)) return "false";
  throw std::invalid_argument("The rendezvous configuration option '" + key +
                              "' does not represent a valid boolean value: '" + value + "'");
}

// Checked now, so a wrong path is a usage error before anything starts.
std::string readable_file(const std::string& key, const std::string& path) {
  std::ifstream f(path);
  if (!f)
    throw std::invalid_argument("--rdzv-conf " + key + "=" + path + ": cannot read the file (" +
                                std::strerror(errno) + ")");
  return path;
}

}  // namespace

std::string apply_rdzv_conf(const std::map<std::string, std::string>& conf, RendezvousSettings& s) {
  std::string is_host;
  for (const auto& [key, value] : conf) {
    if (key == "join_timeout") s.join_timeout = seconds_value(key, value);
    else if (key == "last_call_timeout") s.last_call_timeout = seconds_value(key, value);
    else if (key == "close_timeout") s.close_timeout = seconds_value(key, value);
    else if (key == "keep_alive_interval") s.keep_alive_interval = seconds_value(key, value);
    else if (key == "keep_alive_max_attempt") s.keep_alive_max_attempt = positive_int(key, value);
    else if (key == "read_timeout") s.read_timeout = seconds_value(key, value);
    else if (key == "heartbeat_timeout") seconds_value(key, value);  // torch's per-beat op deadline: read_timeout covers it
    else if (key == "timeout") s.static_timeout = seconds_value(key, value);
    else if (key == "is_host") is_host = bool_value(key, value);
    else if (key == "token_file") {
      // Read now, so a missing or empty file is a usage error before anything starts.
      try {
        s.token = store::auth::read_token_file(value);
      } catch (const std::runtime_error& e) {
        throw std::invalid_argument("--rdzv-conf token_file=" + value + ": " + e.what());
      }
    }
    else if (key == "protocol") {
      if (value != "http" && value != "https")
        throw std::invalid_argument("--rdzv-conf protocol=" + value + ": must be http or https");
      s.etcd.https = value == "https";
    } else if (key == "cacert") s.etcd.cacert = readable_file(key, value);
    else if (key == "cert") s.etcd.cert = readable_file(key, value);
    else if (key == "key") s.etcd.key = readable_file(key, value);
    else if (key == "etcd_prefix") {
      if (value.empty() || value.front() != '/')
        throw std::invalid_argument("--rdzv-conf etcd_prefix=" + value + ": must start with '/'");
      s.etcd.prefix = value;
    }
    else if (key == "store_type") {
      if (value != "tcp")
        throw std::invalid_argument("--rdzv-conf store_type=" + value + ": only 'tcp' is supported by cxxrun");
    } else
      throw std::invalid_argument("--rdzv-conf " + key + "=" + value +
                                  ": unknown key (known: join_timeout, last_call_timeout, close_timeout, "
                                  "keep_alive_interval, keep_alive_max_attempt, read_timeout, heartbeat_timeout, "
                                  "timeout, is_host, store_type, token_file; etcd: protocol, cacert, cert, key, etcd_prefix)");
  }
  return is_host;
}

}  // namespace cxxrun::rendezvous
