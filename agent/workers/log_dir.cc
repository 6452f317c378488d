#include "agent/workers/log_dir.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <system_error>

#include <spdlog/spdlog.h>

#include "agent/process/guardian.h"
#include "agent/process/private_files.h"

namespace fs = std::filesystem;

namespace cxxrun::agent {
namespace {

std::string random_suffix() {
  static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789_";
  std::random_device rd;
  std::string s;
  for (int i = 0; i < 8; ++i) s.push_back(alphabet[rd() % (sizeof alphabet - 1)]);
  return s;
}

bool redirects_anything(const StdSpec& spec) {
  if (spec.all != Std::none) return true;
  for (const auto& [rank, std] : spec.per_rank)
    if (std != Std::none) return true;
  return false;
}

std::string make_temp_base(Guardian* guardian) {
  const char* tmp = getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/torchelastic_XXXXXX";
  std::string made;
  if (guardian)
    made = guardian->make_temp_dir(tmpl);
  else if (mkdtemp(tmpl.data()))
    made = tmpl;
  if (made.empty()) throw std::runtime_error("cannot create a temporary log directory in " + tmpl);
  return made;
}

// A base others may write without the sticky bit lets them move the run
// directory aside and put their own, with their own Python hook, in its
// place: nothing cxxrun can make inside prevents that.
void warn_if_others_can_replace(const std::string& base) {
  struct stat st {};
  if (::stat(base.c_str(), &st) != 0 || (st.st_mode & S_ISVTX) != 0) return;
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0 || (st.st_uid != 0 && st.st_uid != ::geteuid()))
    spdlog::warn("the log directory {} can be changed by other users (mode {:o}, owner uid {}) and is not sticky: they "
                 "could replace this job's run directory; give --log-dir a directory only you can change",
                 base, st.st_mode & 07777, st.st_uid);
}

}  // namespace

LogDir::LogDir(const Config& c, Guardian* guardian) {
  if (c.log_dir == "/dev/null") return;
  std::string base = c.log_dir;
  if (base.empty()) {
    // One that is kept (logs redirected into it) is kept after a SIGKILL too.
    const bool removed = !redirects_anything(c.redirects) && !redirects_anything(c.tee);
    base = make_temp_base(removed ? guardian : nullptr);
    if (removed) remove_at_exit_ = base;
  }
  std::string why_not;
  if (!make_private_dirs(base, why_not)) throw std::runtime_error(why_not);
  warn_if_others_can_replace(base);
  // As torchrun's mkdtemp: a fresh directory, 0700 whatever the umask. In a
  // --log-dir other users may write, a name someone else took (a planted
  // directory or link) is never used; another name is drawn.
  for (int tries = 0; tries < 100; ++tries) {
    const std::string dir = base + "/" + c.run_id + "_" + random_suffix();
    if (make_private_dir(dir)) {
      run_dir_ = dir;
      return;
    }
    if (errno != EEXIST) throw std::runtime_error("cannot create log directory " + dir + ": " + std::strerror(errno));
  }
  throw std::runtime_error("cannot create log directory in " + base + ": 100 fresh names were all taken");
}

LogDir::~LogDir() {
  std::error_code ec;
  if (!remove_at_exit_.empty()) fs::remove_all(remove_at_exit_, ec);
}

void LogDir::prepare_attempt(int attempt, int nproc) {
  if (!enabled()) return;
  fs::path dir = fs::path(run_dir_) / ("attempt_" + std::to_string(attempt));
  std::error_code ec;
  fs::remove_all(dir, ec);
  // The run directory is ours and 0700: what is made in it is fresh.
  std::string why_not;
  if (!ensure_private_dir(dir.string(), why_not)) throw std::runtime_error(why_not);
  for (int r = 0; r < nproc; ++r)
    if (!ensure_private_dir((dir / std::to_string(r)).string(), why_not)) throw std::runtime_error(why_not);
}

std::string LogDir::file(int attempt, int local_rank, const char* name) const {
  if (!enabled()) return "";
  return run_dir_ + "/attempt_" + std::to_string(attempt) + "/" + std::to_string(local_rank) + "/" + name;
}

std::string LogDir::attempt_file(int attempt, const char* name) const {
  if (!enabled()) return "";
  return run_dir_ + "/attempt_" + std::to_string(attempt) + "/" + name;
}

}  // namespace cxxrun::agent
