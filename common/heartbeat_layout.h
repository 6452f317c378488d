/* The heartbeat page: one small shared-memory file per worker through which
 * the agent sees whether a worker still makes progress, without any socket
 * or thread in the worker. The agent creates the file, the worker maps it and
 * writes, the agent maps it and reads. Plain C layout with fixed offsets so
 * that C, C++ and Python (mmap) all read the same bytes: the Python package
 * mirrors them in agent/python/cxxrun/_layout.py, and tests/python/test_layout.py
 * fails when the two differ. The fields added after version 1's first
 * release (step, step_ns, judged) sit where it had reserved zeroes, so a page
 * stays version 1 and an older writer or reader still works with it.
 *
 * Protocol
 * --------
 * Agent: creates the file (CXXRUN_HEARTBEAT_PAGE_SIZE bytes, zeroed), sets
 *   version, section_count and judged, then magic, and passes its path in
 *   CXXRUN_HEARTBEAT_ENV. A fresh file (new inode) per worker per attempt, so
 *   a straggler of an earlier attempt can never write into a new page.
 * Worker, beat: last_beat_ns = CLOCK_MONOTONIC now; beats += 1. The agent
 *   judges the heartbeat only once last_beat_ns != 0: a program that never
 *   beats is never judged. A beat says the worker's main work progressed:
 *   Python's cxxrun.heartbeat() (agent/python/cxxrun/__init__.py) writes one from a side
 *   thread only when the main thread moved since the last it wrote (the
 *   first always, so beating only from a side thread still arms the judge).
 * Worker, step: step = the training step it reached (any value, in any
 *   order: a restart from a checkpoint goes back), then step_ns = CLOCK_MONOTONIC
 *   now (release). step_ns == 0: no step reported; read step_ns (acquire),
 *   then step. A step is a number the worker reports, not a beat: the hang
 *   judges never read it; the agent's view of progress does
 *   (HeartbeatSnapshot::step, agent/hang/heartbeat_monitor.h).
 * judged: set by the agent, read by the worker. Every worker gets a page (the
 *   step it reports is its progress), but only --heartbeat-timeout or
 *   --section-timeout make the agent judge its beats and sections; judged is
 *   1 then, 0 otherwise. What cxxrun.enabled() (Python) reports.
 * Worker, section: a named span with its own timeout, kept in one of
 *   CXXRUN_HEARTBEAT_SECTIONS slots guarded by a sequence lock:
 *     claim   CAS seq from even E to E+1 (only the claimer writes the slot)
 *     write   name, started_ns, timeout_ns, active (relaxed stores)
 *     publish store seq = E+2 (release)
 *   Begin claims a slot with active == 0; end claims the active slot with the
 *   same name and the latest started_ns (nesting unwinds innermost first) and
 *   clears active. A claim that finds the slot taken stores E back.
 * Agent, read: s1 = seq (acquire); skip while odd; read the fields;
 *   acquire fence; retry unless seq == s1 again. A worker that died mid-write
 *   leaves seq odd: that slot is unreadable, the worker is gone anyway.
 * Times are CLOCK_MONOTONIC nanoseconds, the same clock in every process of
 * the machine. timeout_ns == 0 names a section without a deadline.
 * Every 64-bit field is 8-byte aligned and accessed atomically (C11 atomics
 * or C++20 std::atomic_ref); names are only read under the sequence lock. */
#ifndef CXXRUN_COMMON_HEARTBEAT_LAYOUT_H
#define CXXRUN_COMMON_HEARTBEAT_LAYOUT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
#define CXXRUN_HB_ASSERT static_assert
#define CXXRUN_HB_ALIGN8 alignas(8)
#else
#define CXXRUN_HB_ASSERT _Static_assert
#define CXXRUN_HB_ALIGN8 _Alignas(8)
#endif

/* The agent sets this variable to the page's path in each worker's env. */
#define CXXRUN_HEARTBEAT_ENV "CXXRUN_HEARTBEAT_FILE"

#define CXXRUN_HEARTBEAT_MAGIC UINT64_C(0x42484e5552585843) /* "CXXRUNHB" */
#define CXXRUN_HEARTBEAT_VERSION 1u
#define CXXRUN_HEARTBEAT_SECTIONS 16
#define CXXRUN_HEARTBEAT_NAME_MAX 32 /* bytes incl. the NUL; longer names are cut */
#define CXXRUN_HEARTBEAT_PAGE_SIZE 4096

struct cxxrun_heartbeat_section {
  CXXRUN_HB_ALIGN8 uint64_t seq; /* sequence lock, odd while being written */
  uint64_t started_ns;
  uint64_t timeout_ns; /* 0: no deadline */
  uint32_t active;     /* 1 between begin and end */
  uint32_t reserved;
  char name[CXXRUN_HEARTBEAT_NAME_MAX]; /* NUL-terminated */
};

struct cxxrun_heartbeat_page {
  CXXRUN_HB_ALIGN8 uint64_t magic; /* CXXRUN_HEARTBEAT_MAGIC once initialised */
  uint32_t version;
  uint32_t section_count;
  uint64_t owner_pid;    /* the last process that attached, for diagnostics */
  uint64_t beats;        /* number of beats so far */
  uint64_t last_beat_ns; /* 0 until the first beat */
  uint64_t step;         /* the last step reported; meaningful once step_ns != 0 */
  uint64_t step_ns;      /* when it was reported; 0 until the first */
  uint64_t judged;       /* nonzero: the agent judges beats and sections (see below) */
  struct cxxrun_heartbeat_section sections[CXXRUN_HEARTBEAT_SECTIONS];
};

CXXRUN_HB_ASSERT(sizeof(struct cxxrun_heartbeat_section) == 64, "section slot layout");
CXXRUN_HB_ASSERT(offsetof(struct cxxrun_heartbeat_section, name) == 32, "section slot layout");
CXXRUN_HB_ASSERT(offsetof(struct cxxrun_heartbeat_page, beats) == 24, "page layout");
CXXRUN_HB_ASSERT(offsetof(struct cxxrun_heartbeat_page, last_beat_ns) == 32, "page layout");
CXXRUN_HB_ASSERT(offsetof(struct cxxrun_heartbeat_page, step) == 40, "page layout");
CXXRUN_HB_ASSERT(offsetof(struct cxxrun_heartbeat_page, step_ns) == 48, "page layout");
CXXRUN_HB_ASSERT(offsetof(struct cxxrun_heartbeat_page, judged) == 56, "page layout");
CXXRUN_HB_ASSERT(offsetof(struct cxxrun_heartbeat_page, sections) == 64, "page layout");
CXXRUN_HB_ASSERT(sizeof(struct cxxrun_heartbeat_page) <= CXXRUN_HEARTBEAT_PAGE_SIZE, "page fits");

#ifdef __cplusplus
#include <atomic>
#include <time.h>

/* The protocol's two shared pieces for C++ users: the clock and the reader
 * side of the sequence lock (the writer lives in worker_runtime/heartbeat.cc). */
namespace cxxrun::heartbeat {

template <class T>
std::atomic_ref<T> atomic(const T& field) {
  // Every field is read-only for this side but shared with a writer, so it is
  // read through an atomic; atomic_ref<const T> is C++26.
  return std::atomic_ref<T>(const_cast<T&>(field));
}

inline uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

struct SectionCopy {
  uint64_t seq = 0;
  uint64_t started_ns = 0;
  uint64_t timeout_ns = 0;
  bool active = false;
  char name[CXXRUN_HEARTBEAT_NAME_MAX] = {};
};

// A consistent copy of one slot, or false when it stayed mid-write for the
// whole bounded spin (its writer is descheduled or died inside the write).
inline bool read_section(const cxxrun_heartbeat_section& s, SectionCopy& out) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    const uint64_t s1 = atomic(s.seq).load(std::memory_order_acquire);
    if (s1 & 1) continue;
    out.started_ns = atomic(s.started_ns).load(std::memory_order_relaxed);
    out.timeout_ns = atomic(s.timeout_ns).load(std::memory_order_relaxed);
    out.active = atomic(s.active).load(std::memory_order_relaxed) != 0;
    for (int i = 0; i < CXXRUN_HEARTBEAT_NAME_MAX; ++i)
      out.name[i] = atomic(s.name[i]).load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (atomic(s.seq).load(std::memory_order_relaxed) != s1) continue;
    out.seq = s1;
    out.name[CXXRUN_HEARTBEAT_NAME_MAX - 1] = 0;  // the writer may be buggy
    return true;
  }
  return false;
}

}  // namespace cxxrun::heartbeat
#endif /* __cplusplus */

#endif /* CXXRUN_COMMON_HEARTBEAT_LAYOUT_H */
