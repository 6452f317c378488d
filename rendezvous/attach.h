// How a tool outside the job (cxxrunctl) reaches a running job's rendezvous
// store: as a client only, never hosting it, never joining a round, with
// one deadline for the whole connect. The job's agents reach the same store
// through their backend (job_store.h, etcd_job_store.h).
#pragma once

#include <chrono>
#include <memory>

#include "rendezvous/rendezvous.h"
#include "store/client.h"

namespace cxxrun::rendezvous {

// The store is up and refused us: a wrong token, or none where it wants one
// (store/auth.h); etcd: a wrong login, or none where it wants one. Nothing
// was read or written. (etcd logs in at the first call, so its refusal may
// come from a later call as store::StoreAuthError, a StoreRefused.)
struct AttachRefused : RendezvousError {
  using RendezvousError::RendezvousError;
};

// A client of the job's store as `config` names it (Backend::c10d: the
// TCPStore at host:port with settings.token; Backend::etcd: the members in
// settings.etcd), its calls bounded by `timeout`. Throws AttachRefused,
// or RendezvousError (unreachable within `timeout`; local and static: no
// rendezvous store to attach to), one line each.
std::unique_ptr<store::StoreClient> attach(const RendezvousConfig& config, std::chrono::milliseconds timeout);

}  // namespace cxxrun::rendezvous
