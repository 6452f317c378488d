// How the rendezvous calls etcd: which member each process asks first, and
// which writes it sends again. Private to rendezvous/ (etcd/ is out of reach
// above it); the store, the liveness and the job store all call through
// these.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>

#include "rendezvous/rendezvous.h"

namespace cxxrun::etcd {
struct Options;
}  // namespace cxxrun::etcd

namespace cxxrun::rendezvous {

// etcd's client options from the settings: members, TLS, and `timeout` as
// each call's deadline. Requests go to one member until it fails, then on
// through the list: this process starts at a member picked by its host and
// pid, so that a job's nodes spread over the members (the one home of that
// choice), and goes round the settings' order from there.
etcd::Options etcd_options(const EtcdSettings& settings, std::chrono::milliseconds timeout);
// The same, starting at member `first` (modulo their number).
etcd::Options etcd_options(const EtcdSettings& settings, std::chrono::milliseconds timeout, size_t first);

// A call's timeout that ends it by `deadline`: at least 1 ms, since etcd's
// client reads zero as its default timeout.
std::chrono::milliseconds remaining(std::chrono::steady_clock::time_point deadline);

// Runs `write(timeout)`, a write whose second application changes nothing
// (a put of this node's own key, a transaction guarded by a marker), again
// while etcd answers that it may or may not have applied it: an overloaded
// etcd times its own proposals out ("request timed out"), and 10,000 agents
// joining at once failed their joins on it. Pauses from 20 ms, doubling to
// half a second; etcd::EtcdTimeout at `deadline`.
void resend_while_indeterminate(std::chrono::steady_clock::time_point deadline,
                                const std::function<void(std::chrono::milliseconds timeout)>& write);

}  // namespace cxxrun::rendezvous
