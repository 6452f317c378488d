// etcd's errors (etcd/errors.h) in the store's terms (store/client_errors.h),
// for what runs the rendezvous over etcd: one line naming what was done, to
// which key, at which members, and etcd's own words. A refused login or a
// key it may not touch is final (StoreAuthError: cxxrunctl's exit 4, not the
// 3 of a store that cannot be reached); a deadline passed is a StoreTimeout.
#pragma once

#include <string>

#include "etcd/errors.h"
#include "rendezvous/rendezvous.h"
#include "store/client_errors.h"

namespace cxxrun::rendezvous {

// "etcd <what> <key> at <member>,<member>...": where an error happened.
inline std::string etcd_context(const EtcdSettings& s, const std::string& what, const std::string& key) {
  std::string members;
  for (const auto& e : s.endpoints) members += (members.empty() ? "" : ",") + e.text();
  return "etcd " + what + " " + key + " at " + members;
}

// Throws the etcd error being handled as the store's, after `context`.
// Call only inside a catch of etcd::EtcdError.
[[noreturn]] inline void rethrow_as_store_error(const std::string& context) {
  try {
    throw;
  } catch (const etcd::EtcdTimeout& e) {
    throw store::StoreTimeout(context + ": " + e.what());
  } catch (const etcd::EtcdAuthError& e) {
    throw store::StoreAuthError(context + ": " + e.what());
  } catch (const etcd::EtcdError& e) {
    throw store::StoreError(context + ": " + e.what());
  }
}

// `call()`, its etcd errors thrown as the store's.
template <typename F>
auto as_store_errors(const EtcdSettings& s, const std::string& what, const std::string& key, F&& call) {
  try {
    return call();
  } catch (const etcd::EtcdError&) {
    rethrow_as_store_error(etcd_context(s, what, key));
  }
}

}  // namespace cxxrun::rendezvous
