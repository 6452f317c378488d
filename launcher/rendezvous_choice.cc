#include "launcher/rendezvous_choice.h"

#include <array>
#include <random>
#include <stdexcept>
#include <system_error>

#include <fmt/format.h>

#include "launcher/values.h"
#include "rendezvous/endpoint.h"

namespace cxxrun::launcher {
namespace {

namespace rdzv = cxxrun::rendezvous;

constexpr int kC10dDefaultPort = 29400;
constexpr const char* kLoopback = "127.0.0.1";

rdzv::Endpoint endpoint_of(const RawValue& v, int default_port) {
  try {
    return rdzv::parse_endpoint(v.text, default_port);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("{}: {}", v.shown(), e.what()));
  }
}

int free_local_port() {
  try {
    return rdzv::pick_free_port(kLoopback);
  } catch (const std::system_error& e) {
    throw std::runtime_error(fmt::format("cannot find a free port on {}: {}", kLoopback, e.what()));
  }
}

RendezvousChoice standalone(std::vector<std::string>& notes) {
  RendezvousChoice choice{random_uuid4(), kLoopback, free_local_port()};
  notes.push_back(
      fmt::format("Rendezvous info: --rdzv-backend=c10d --rdzv-endpoint=localhost:0 --rdzv-id={} "
                  "(workers' store on {}:{})",
                  choice.run_id, choice.master_addr, choice.master_port));
  return choice;
}

RendezvousChoice c10d(const RawOptions& raw, std::vector<std::string>& warnings) {
  if (raw.at("rdzv_endpoint").text.empty())
    warnings.push_back(
        "master_addr is only used for static rdzv_backend and when rdzv_endpoint is not "
        "specified.");
  return {raw.at("rdzv_id").text, kLoopback, free_local_port()};
}

RendezvousChoice static_backend(const RawOptions& raw) {
  const RawValue& endpoint_text = raw.at("rdzv_endpoint");
  const RawValue* origin = &raw.at("master_port");
  rdzv::Endpoint endpoint;
  if (!endpoint_text.text.empty()) {
    // torch's static backend: an explicit endpoint replaces master_addr:master_port.
    origin = &endpoint_text;
    endpoint = endpoint_of(endpoint_text, rdzv::kNoPort);
    if (endpoint.port == rdzv::kNoPort)
      throw UsageError(endpoint_text.shown() + ": port is missing; add :PORT or use --master-port");
    if (endpoint.port == 0) throw UsageError(endpoint_text.shown() + ": port must be in 1..65535");
  } else {
    endpoint = endpoint_of(raw.at("master_addr"), rdzv::kNoPort);
    if (endpoint.port != rdzv::kNoPort)
      throw UsageError(raw.at("master_addr").shown() + ": give the port with --master-port");
    endpoint.port = parse_port(raw.at("master_port"));
  }
  // Worker rank 0 will listen here; a taken port would only show up as a
  // TCPStore failure in every worker.
  if (rdzv::port_in_use(endpoint.host, endpoint.port))
    throw UsageError(
        fmt::format("{}: port {} is already in use on {}; pick another port, or use --standalone "
                    "for a free one",
                    origin->shown(), endpoint.port, endpoint.host));
  return {raw.at("rdzv_id").text, endpoint.host, endpoint.port};
}

}  // namespace

std::string random_uuid4() {
  std::random_device device;
  std::array<unsigned char, 16> bytes{};
  for (size_t i = 0; i < bytes.size(); i += 4) {
    unsigned int word = device();
    for (size_t j = 0; j < 4; ++j) bytes[i + j] = static_cast<unsigned char>(word >> (8 * j));
  }
  bytes[6] = static_cast<unsigned char>((bytes[6] & 0x0f) | 0x40);  // version 4
  bytes[8] = static_cast<unsigned char>((bytes[8] & 0x3f) | 0x80);  // RFC 4122 variant
  std::string out;
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i == 4 || i == 6 || i == 8 || i == 10) out += '-';
    out += fmt::format("{:02x}", bytes[i]);
  }
  return out;
}

void check_rendezvous_supported(const RawOptions& raw) {
  if (raw.flag("standalone")) return;  // torchrun ignores the backend options then
  const RawValue& backend = raw.at("rdzv_backend");
  if (backend.text == "etcd" || backend.text == "etcd-v2")
    throw UsageError(backend.shown() +
                     ": etcd rendezvous is not supported by cxxrun (use c10d or static)");
  if (backend.text != "static" && backend.text != "c10d")
    throw UsageError(backend.shown() + ": unknown rendezvous backend (choose from static, c10d)");
  if (backend.text != "c10d") return;

  const RawValue& endpoint_text = raw.at("rdzv_endpoint");
  rdzv::Endpoint endpoint = endpoint_of(endpoint_text, kC10dDefaultPort);
  if (!rdzv::is_local_host(endpoint.host))
    throw NotBuiltYet(fmt::format(
        "--rdzv-backend=c10d with {} (not a local address) is not built yet: this cxxrun runs "
        "single-node jobs; use --standalone or a localhost endpoint",
        endpoint_text.shown()));
}

RendezvousChoice choose_rendezvous(const RawOptions& raw, std::vector<std::string>& warnings,
                                   std::vector<std::string>& notes) {
  check_rendezvous_supported(raw);
  if (raw.flag("standalone")) return standalone(notes);
  if (raw.at("rdzv_backend").text == "c10d") return c10d(raw, warnings);
  return static_backend(raw);
}

}  // namespace cxxrun::launcher
