#include "agent/hang/heartbeat_monitor.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <stdexcept>

#include "agent/process/private_files.h"
#include "agent/process/stale_temp_dirs.h"
#include "common/heartbeat_layout.h"

namespace cxxrun::agent {
namespace {

using heartbeat::atomic;
using Page = cxxrun_heartbeat_page;
using std::chrono::nanoseconds;

std::string seconds_text(nanoseconds ns) { return fmt::format("{:.1f} s", ns.count() / 1e9); }

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw std::runtime_error("heartbeat: cannot " + what + " " + path + ": " + strerror(errno));
}

bool writable_dir(const char* path) {
  struct stat st;
  return path && *path && stat(path, &st) == 0 && S_ISDIR(st.st_mode) && access(path, W_OK | X_OK) == 0;
}

// tmpfs first: the pages are written at every beat and never need a disk.
// Where no other user can move the directory aside and put pages of their
// own at the names the workers open (agent/process/private_files.h).
std::string make_heartbeat_dir() {
  const char* tmpdir = std::getenv("TMPDIR");
  std::string base = writable_dir("/dev/shm") && replaceable_by_others("/dev/shm").empty() ? "/dev/shm" : safe_temp_base();
  if (base.empty()) base = writable_dir(tmpdir) ? tmpdir : "/tmp";
  std::string tmpl = owned_temp_template(base, kHeartbeatDirPrefix);
  if (!mkdtemp(tmpl.data())) fail("create a directory in", base);
  return tmpl;
}

// Elapsed time from `from` to `now`, never negative (a worker's clock read
// may land just after the agent's).
nanoseconds since(uint64_t from, nanoseconds now) {
  const auto n = static_cast<uint64_t>(now.count());
  return nanoseconds(n > from ? static_cast<int64_t>(n - from) : 0);
}

// The run directory's heartbeat/, 0700 and ours whatever the umask it was
// made with (agent/process/private_files.h).
std::string private_dir(const std::string& dir) {
  std::string why_not;
  if (!ensure_private_dir(dir, why_not)) throw std::runtime_error("heartbeat: " + why_not);
  return dir;
}

nanoseconds monotonic_now() { return nanoseconds(static_cast<int64_t>(heartbeat::monotonic_ns())); }

}  // namespace

std::string describe(const HeartbeatViolation& v) {
  const nanoseconds open_for = v.limit + v.overdue;
  if (v.kind == HeartbeatViolation::Kind::heartbeat)
    return fmt::format("local rank {}: no heartbeat for {} (timeout {})", v.local_rank, seconds_text(open_for),
                       seconds_text(v.limit));
  return fmt::format("local rank {}: section '{}' open for {} ({} {})", v.local_rank, v.what, seconds_text(open_for),
                     v.from_flag ? "--section-timeout" : "timeout", seconds_text(v.limit));
}

HeartbeatMonitor::HeartbeatMonitor(nanoseconds heartbeat_timeout, const std::string& dir,
                                   std::map<std::string, nanoseconds> section_limits, bool judged)
    : heartbeat_timeout_(heartbeat_timeout),
      section_limits_(std::move(section_limits)),
      judged_(judged),
      dir_(dir.empty() ? make_heartbeat_dir() : private_dir(dir)),
      own_dir_(dir.empty()) {}

HeartbeatMonitor::~HeartbeatMonitor() {
  remove_all();
  if (own_dir_ && rmdir(dir_.c_str()) != 0)
    spdlog::warn("heartbeat: cannot remove {}: {}", dir_, strerror(errno));
}

std::string HeartbeatMonitor::create(int local_rank) {
  remove(local_rank);
  const std::string path = fmt::format("{}/rank{}.{}", dir_, local_rank, ++generation_);
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) fail("create", path);
  void* m = MAP_FAILED;
  if (ftruncate(fd, CXXRUN_HEARTBEAT_PAGE_SIZE) == 0)
    m = mmap(nullptr, CXXRUN_HEARTBEAT_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  const int e = errno;
  close(fd);
  if (m == MAP_FAILED) {
    unlink(path.c_str());
    errno = e;
    fail("size and map", path);
  }
  // ftruncate zero-filled the page; the magic goes last so that a reader
  // never accepts a half-made header.
  auto* page = static_cast<Page*>(m);
  page->version = CXXRUN_HEARTBEAT_VERSION;
  page->section_count = CXXRUN_HEARTBEAT_SECTIONS;
  page->judged = judged_ ? 1 : 0;
  atomic(page->magic).store(CXXRUN_HEARTBEAT_MAGIC, std::memory_order_release);
  pages_[local_rank] = {path, m};
  return path;
}

void HeartbeatMonitor::remove(int local_rank) {
  auto it = pages_.find(local_rank);
  if (it == pages_.end()) return;
  munmap(it->second.page, CXXRUN_HEARTBEAT_PAGE_SIZE);
  if (unlink(it->second.path.c_str()) != 0 && errno != ENOENT)
    spdlog::warn("heartbeat: cannot remove {}: {}", it->second.path, strerror(errno));
  pages_.erase(it);
}

void HeartbeatMonitor::remove_all() {
  while (!pages_.empty()) remove(pages_.begin()->first);
}

std::vector<HeartbeatViolation> HeartbeatMonitor::check(nanoseconds now) const {
  std::vector<HeartbeatViolation> out;
  for (const auto& [rank, mapped] : pages_) {
    const auto* page = static_cast<const Page*>(mapped.page);
    const uint64_t last = atomic(page->last_beat_ns).load(std::memory_order_relaxed);
    if (heartbeat_timeout_.count() > 0 && last != 0) {
      const nanoseconds silent = since(last, now);
      if (silent > heartbeat_timeout_)
        out.push_back({rank, HeartbeatViolation::Kind::heartbeat, "heartbeat", heartbeat_timeout_,
                       silent - heartbeat_timeout_});
    }
    for (const auto& slot : page->sections) {
      heartbeat::SectionCopy s;
      if (!heartbeat::read_section(slot, s) || !s.active) continue;
      // Its own deadline, if any (one beyond int64 nanoseconds, 292 years,
      // is none), and the command line's for its name: the earlier counts.
      std::optional<nanoseconds> limit;
      if (s.timeout_ns != 0 && s.timeout_ns <= INT64_MAX) limit = nanoseconds(static_cast<int64_t>(s.timeout_ns));
      bool from_flag = false;
      if (auto flag = section_limits_.find(s.name); flag != section_limits_.end() && (!limit || flag->second < *limit)) {
        limit = flag->second;
        from_flag = true;
      }
      if (!limit) continue;
      const nanoseconds open_for = since(s.started_ns, now);
      if (open_for > *limit)
        out.push_back({rank, HeartbeatViolation::Kind::section, s.name, *limit, open_for - *limit, from_flag});
    }
  }
  return out;
}

std::vector<HeartbeatViolation> HeartbeatMonitor::check() const { return check(monotonic_now()); }

std::optional<HeartbeatSnapshot> HeartbeatMonitor::snapshot(int local_rank, nanoseconds now) const {
  auto it = pages_.find(local_rank);
  if (it == pages_.end()) return std::nullopt;
  const auto* page = static_cast<const Page*>(it->second.page);
  HeartbeatSnapshot snap;
  snap.pid = static_cast<pid_t>(atomic(page->owner_pid).load(std::memory_order_relaxed));
  snap.beats = atomic(page->beats).load(std::memory_order_relaxed);
  if (uint64_t last = atomic(page->last_beat_ns).load(std::memory_order_relaxed)) snap.since_last_beat = since(last, now);
  if (uint64_t at = atomic(page->step_ns).load(std::memory_order_acquire)) {
    snap.step = atomic(page->step).load(std::memory_order_relaxed);
    snap.since_step = since(at, now);
  }
  for (const auto& slot : page->sections) {
    heartbeat::SectionCopy s;
    if (heartbeat::read_section(slot, s) && s.active)
      snap.sections.push_back({s.name, since(s.started_ns, now), nanoseconds(static_cast<int64_t>(s.timeout_ns))});
  }
  return snap;
}

std::optional<HeartbeatSnapshot> HeartbeatMonitor::snapshot(int local_rank) const {
  return snapshot(local_rank, monotonic_now());
}

}  // namespace cxxrun::agent
