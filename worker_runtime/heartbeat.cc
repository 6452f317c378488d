#include "worker_runtime/heartbeat.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>

#include "common/heartbeat_layout.h"
#include "common/env_names.h"

namespace {

using cxxrun::heartbeat::atomic;
using cxxrun::heartbeat::monotonic_ns;
using cxxrun::heartbeat::read_section;
using cxxrun::heartbeat::SectionCopy;
using Page = cxxrun_heartbeat_page;
using Slot = cxxrun_heartbeat_section;

// Null while reporting is off; every call starts with one load of it.
std::atomic<Page*> g_page{nullptr};
pthread_once_t g_atfork_once = PTHREAD_ONCE_INIT;

// A forked child (data loader, helper) is not the worker: if it went on
// beating, a hung worker would look alive. The mapping itself stays; one
// page is not worth an munmap racing the child's other threads.
void detach_in_child() { g_page.store(nullptr, std::memory_order_relaxed); }

uint64_t to_ns(double seconds) {
  if (!(seconds > 0)) return 0;  // also NaN
  // Far beyond any run; keeps started_ns + timeout_ns from overflowing.
  constexpr double kMax = 1e9 * 60 * 60 * 24 * 365 * 100;
  return static_cast<uint64_t>(std::fmin(seconds * 1e9, kMax));
}

void cut_name(const char* name, char (&out)[CXXRUN_HEARTBEAT_NAME_MAX]) {
  int i = 0;
  for (; name[i] && i < CXXRUN_HEARTBEAT_NAME_MAX - 1; ++i) out[i] = name[i];
  for (; i < CXXRUN_HEARTBEAT_NAME_MAX; ++i) out[i] = 0;
}

bool same_name(const char* a, const char* b) {
  for (int i = 0; i < CXXRUN_HEARTBEAT_NAME_MAX; ++i) {
    if (a[i] != b[i]) return false;
    if (!a[i]) return true;
  }
  return true;
}

// Takes the slot for writing if it still holds what `seen` was read from:
// a changed seq means another thread got there first.
bool claim(Slot& s, uint64_t seen) {
  if (!atomic(s.seq).compare_exchange_strong(seen, seen + 1, std::memory_order_acquire)) return false;
  // The odd seq must be visible before any field changes.
  std::atomic_thread_fence(std::memory_order_release);
  return true;
}

void publish(Slot& s, uint64_t seen) { atomic(s.seq).store(seen + 2, std::memory_order_release); }

bool is_heartbeat_page(const Page* p) {
  return atomic(p->magic).load(std::memory_order_acquire) == CXXRUN_HEARTBEAT_MAGIC &&
         p->version == CXXRUN_HEARTBEAT_VERSION && p->section_count == CXXRUN_HEARTBEAT_SECTIONS;
}

// Maps the page at `path`; null with errno set when it cannot be used.
Page* map_page(const char* path) {
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return nullptr;
  struct stat st;
  int e = fstat(fd, &st) != 0 ? errno : st.st_size < CXXRUN_HEARTBEAT_PAGE_SIZE ? EINVAL : 0;
  if (e) {
    close(fd);
    errno = e;
    return nullptr;
  }
  void* m = mmap(nullptr, CXXRUN_HEARTBEAT_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  e = errno;
  close(fd);
  if (m == MAP_FAILED) {
    errno = e;
    return nullptr;
  }
  auto* page = static_cast<Page*>(m);
  if (!is_heartbeat_page(page)) {
    munmap(m, CXXRUN_HEARTBEAT_PAGE_SIZE);
    errno = EINVAL;
    return nullptr;
  }
  return page;
}

}  // namespace

extern "C" {

int cxxrun_heartbeat_init(void) {
  if (g_page.load(std::memory_order_acquire)) return 0;
  const char* path = std::getenv(cxxrun::env::kHeartbeatFile);
  if (!path || !*path) return 0;
  Page* page = map_page(path);
  if (!page) return -1;
  atomic(page->owner_pid).store(static_cast<uint64_t>(getpid()), std::memory_order_relaxed);
  pthread_once(&g_atfork_once, [] { pthread_atfork(nullptr, nullptr, detach_in_child); });
  Page* none = nullptr;
  if (!g_page.compare_exchange_strong(none, page, std::memory_order_acq_rel))
    munmap(page, CXXRUN_HEARTBEAT_PAGE_SIZE);  // another thread attached first
  return 0;
}

void cxxrun_heartbeat_beat(void) {
  Page* page = g_page.load(std::memory_order_acquire);
  if (!page) return;
  atomic(page->last_beat_ns).store(monotonic_ns(), std::memory_order_relaxed);
  atomic(page->beats).fetch_add(1, std::memory_order_relaxed);
}

void cxxrun_step(uint64_t step) {
  Page* page = g_page.load(std::memory_order_acquire);
  if (!page) return;
  // The step before its time (release): a reader that sees the time sees it.
  atomic(page->step).store(step, std::memory_order_relaxed);
  atomic(page->step_ns).store(monotonic_ns(), std::memory_order_release);
}

int cxxrun_section_begin(const char* name, double timeout_seconds) {
  Page* page = g_page.load(std::memory_order_acquire);
  if (!page) return 1;
  if (!name) {
    errno = EINVAL;
    return -1;
  }
  char cut[CXXRUN_HEARTBEAT_NAME_MAX];
  cut_name(name, cut);
  const uint64_t timeout = to_ns(timeout_seconds);
  for (Slot& s : page->sections) {
    SectionCopy seen;
    if (!read_section(s, seen) || seen.active || !claim(s, seen.seq)) continue;
    for (int i = 0; i < CXXRUN_HEARTBEAT_NAME_MAX; ++i) atomic(s.name[i]).store(cut[i], std::memory_order_relaxed);
    atomic(s.timeout_ns).store(timeout, std::memory_order_relaxed);
    atomic(s.started_ns).store(monotonic_ns(), std::memory_order_relaxed);
    atomic(s.active).store(1u, std::memory_order_relaxed);
    publish(s, seen.seq);
    return 0;
  }
  errno = ENOSPC;
  return -1;
}

void cxxrun_section_end(const char* name) {
  Page* page = g_page.load(std::memory_order_acquire);
  if (!page || !name) return;
  char cut[CXXRUN_HEARTBEAT_NAME_MAX];
  cut_name(name, cut);
  // Retries only when another thread of this process changed the chosen
  // slot between reading and claiming it; bounded all the same.
  for (int attempt = 0; attempt < 100; ++attempt) {
    Slot* innermost = nullptr;
    SectionCopy chosen;
    for (Slot& s : page->sections) {
      SectionCopy seen;
      if (!read_section(s, seen) || !seen.active || !same_name(seen.name, cut)) continue;
      if (!innermost || seen.started_ns >= chosen.started_ns) {
        innermost = &s;
        chosen = seen;
      }
    }
    if (!innermost) return;
    if (!claim(*innermost, chosen.seq)) continue;
    atomic(innermost->active).store(0u, std::memory_order_relaxed);
    publish(*innermost, chosen.seq);
    return;
  }
}

void cxxrun_heartbeat_shutdown(void) {
  if (Page* page = g_page.exchange(nullptr, std::memory_order_acq_rel)) munmap(page, CXXRUN_HEARTBEAT_PAGE_SIZE);
}

}  // extern "C"
