// What the etcd client throws. Every failure is one of these, each with a
// one-line message that names the endpoint (or every endpoint) and the cause;
// nothing from Boost, OpenSSL or the JSON parser escapes the library.
//
// For a write (put, delete, txn, lease_grant) the class says what the caller
// may assume about its effect:
// - EtcdRequestError, EtcdAuthError, EtcdTlsError, EtcdUnavailable: it was
//   not applied (refused, or it never reached a member).
// - EtcdTimeout, EtcdIndeterminate: unknown. The request may have reached the
//   leader and been committed although no answer came back; read the key
//   again before acting on either outcome (docs/etcd-client.md).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace cxxrun::etcd {

struct EtcdError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The call's deadline passed while some member was reachable (it answered
// with a retryable error, or not at all in time).
struct EtcdTimeout : EtcdError {
  using EtcdError::EtcdError;
};

// No member could be reached: every endpoint failed to connect (or to take
// the request) until the deadline, or failed in a way retrying cannot mend
// (a host that does not resolve). The message lists each endpoint and why.
struct EtcdUnavailable : EtcdError {
  using EtcdError::EtcdError;
};

// The TLS setup failed: a file that cannot be loaded, a server certificate
// that does not verify against the CA or the endpoint's host, or a server
// that refused our client certificate (or our lack of one).
struct EtcdTlsError : EtcdUnavailable {
  using EtcdUnavailable::EtcdUnavailable;
};

// Authentication or authorisation failed: wrong user or password, a cluster
// that needs credentials we were not given, permission denied on a key.
struct EtcdAuthError : EtcdError {
  using EtcdError::EtcdError;
};

// A write whose request was sent but whose answer was lost (the connection
// broke, or the member answered "request timed out"): it may or may not
// have been applied. Never retried by the client for that reason.
struct EtcdIndeterminate : EtcdError {
  using EtcdError::EtcdError;
};

// The cluster answered and refused the request (bad argument, lease not
// found, ...). grpc_code is gRPC's status code (3 invalid argument,
// 5 not found, 9 failed precondition, ...), 0 when the answer was not etcd's.
struct EtcdRequestError : EtcdError {
  EtcdRequestError(const std::string& message, int code) : EtcdError(message), grpc_code(code) {}
  int grpc_code;
};

// A watch asked for history that compaction removed: events between its last
// seen revision and compact_revision are gone, so it cannot continue without
// a gap. The caller must re-read the state and start a new watch.
struct EtcdCompacted : EtcdError {
  EtcdCompacted(const std::string& message, int64_t compact) : EtcdError(message), compact_revision(compact) {}
  int64_t compact_revision;
};

}  // namespace cxxrun::etcd
