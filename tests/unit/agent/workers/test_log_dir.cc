// The run directory and what cxxrun writes in it are private to the job's
// user whatever the umask (0700 directories, 0600 files, as torchrun's
// mkdtemp), and nothing is created through a link another user planted
// (agent/workers/log_dir.h, agent/process/private_files.h, agent/python/hook.h).
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "agent/config.h"
#include "agent/workers/log_dir.h"
#include "agent/process/private_files.h"
#include "agent/python/hook.h"
#include "temp_tree.h"
#include "worker_runtime/error_file.h"

using namespace cxxrun::agent;
namespace fs = std::filesystem;

namespace {

unsigned mode_of(const std::string& path) {
  struct stat st {};
  REQUIRE(lstat(path.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

// Sets the umask for a scope.
struct Umask {
  mode_t old;
  explicit Umask(mode_t m) : old(umask(m)) {}
  ~Umask() { umask(old); }
};

// Every entry under `root`, the root included, with a mode other than 0700
// for a directory or 0600 for a file: "" when none.
std::string not_private(const std::string& root) {
  std::string found;
  if (mode_of(root) != 0700) found += root + " ";
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const unsigned want = e.is_directory() ? 0700 : 0600;
    if (mode_of(e.path().string()) != want) found += e.path().string() + " ";
  }
  return found;
}

}  // namespace

TEST_CASE("the run directory, its attempts and the Python hook are private whatever the umask", "[log_dir]") {
  for (mode_t mask : {mode_t(0), mode_t(022), mode_t(0777)}) {
    TempDir tmp;
    REQUIRE(chmod(tmp.path.c_str(), 01777) == 0);  // a shared --log-dir
    Umask scoped(mask);
    Config c;
    c.log_dir = tmp.path + "/new/logs";  // made by cxxrun, so 0700 as well
    c.run_id = "job";
    LogDir logs(c);
    logs.prepare_attempt(0, 2);
    std::string why_not;
    REQUIRE(install_python_hook(logs.run_dir() + "/python", why_not));
    INFO("umask " << mask);
    CHECK(not_private(logs.run_dir()) == "");
    CHECK(mode_of(tmp.path + "/new") == 0700);
    CHECK(mode_of(tmp.path + "/new/logs") == 0700);
    CHECK(mode_of(tmp.path) == 01777);  // there already: left as it is
    CHECK(fs::exists(logs.run_dir() + "/attempt_0/1"));
    CHECK(fs::exists(logs.run_dir() + "/python/__pycache__"));
    CHECK(fs::exists(logs.run_dir() + "/python/cxxrun/__init__.py"));
    // Again, as at a restart: still private.
    logs.prepare_attempt(1, 1);
    CHECK(not_private(logs.run_dir()) == "");
  }
}

TEST_CASE("private files are never made through a link or over another user's file", "[log_dir]") {
  TempDir tmp;
  const std::string elsewhere = tmp.path + "/elsewhere";
  REQUIRE(mkdir(elsewhere.c_str(), 0777) == 0);
  REQUIRE(chmod(elsewhere.c_str(), 0777) == 0);
  REQUIRE(symlink(elsewhere.c_str(), (tmp.path + "/dir-link").c_str()) == 0);
  REQUIRE(symlink((elsewhere + "/file").c_str(), (tmp.path + "/file-link").c_str()) == 0);

  // A planted link is never taken for the directory or the file it names.
  CHECK_FALSE(make_private_dir(tmp.path + "/dir-link"));
  CHECK(errno == EEXIST);
  std::string why_not;
  CHECK_FALSE(ensure_private_dir(tmp.path + "/dir-link", why_not));
  CHECK(why_not.find("a link") != std::string::npos);
  CHECK(open_private_file(tmp.path + "/file-link", false, true) < 0);
  CHECK(errno == ELOOP);
  CHECK_FALSE(write_private_file(tmp.path + "/file-link", "x", false, why_not));
  CHECK_FALSE(fs::exists(elsewhere + "/file"));
  CHECK(mode_of(elsewhere) == 0777);  // untouched

  // Another user's file or directory is left as it is.
  const std::string theirs = tmp.path + "/theirs";
  std::ofstream(theirs) << "their data";
  REQUIRE(chown(theirs.c_str(), 65534, 65534) == 0);
  CHECK(open_private_file(theirs, false, true) < 0);
  CHECK(errno == EPERM);
  CHECK(fs::file_size(theirs) == 10);
  REQUIRE(chown(elsewhere.c_str(), 65534, 65534) == 0);
  CHECK_FALSE(ensure_private_dir(elsewhere, why_not));
  CHECK(why_not.find("belongs to uid 65534") != std::string::npos);

  // A planted FIFO neither holds the open nor is written.
  REQUIRE(mkfifo((tmp.path + "/fifo").c_str(), 0666) == 0);
  CHECK(open_private_file(tmp.path + "/fifo", false, true) < 0);

  // `fresh` refuses anything there; an existing file of ours is emptied and made 0600.
  const std::string ours = tmp.path + "/ours";
  std::ofstream(ours) << "old text";
  REQUIRE(chmod(ours.c_str(), 0666) == 0);
  CHECK_FALSE(write_private_file(ours, "new", true, why_not));
  REQUIRE(write_private_file(ours, "new", false, why_not));
  CHECK(mode_of(ours) == 0600);
  CHECK(fs::file_size(ours) == 3);
}

TEST_CASE("a worker's error file is private and never written through a link", "[log_dir]") {
  TempDir tmp;
  Umask scoped(0);
  const std::string path = tmp.path + "/error.json";
  setenv("TORCHELASTIC_ERROR_FILE", path.c_str(), 1);
  REQUIRE(cxxrun::worker::write_error_file("boom"));
  CHECK(mode_of(path) == 0600);
  REQUIRE(unlink(path.c_str()) == 0);
  REQUIRE(symlink((tmp.path + "/elsewhere").c_str(), path.c_str()) == 0);
  CHECK_FALSE(cxxrun::worker::write_error_file("boom"));
  CHECK_FALSE(fs::exists(tmp.path + "/elsewhere"));
  unsetenv("TORCHELASTIC_ERROR_FILE");
}

TEST_CASE("the hook dumps stacks only into a file of this user's", "[log_dir]") {
  if (geteuid() != 0) {
    WARN("skipped: needs root, to leave a file of another user's");
    return;
  }
  TempDir tmp;
  std::string why_not;
  REQUIRE(install_python_hook(tmp.path + "/python", why_not));
  // A file another user left at the stacks file's name, open to all.
  const std::string theirs = tmp.path + "/stacks.txt";
  std::ofstream(theirs) << "";
  REQUIRE(chown(theirs.c_str(), 12345, 12345) == 0);
  REQUIRE(chmod(theirs.c_str(), 0666) == 0);
  const std::string python = "CXXRUN_STACK_SIGNAL=37 PYTHONPATH=" + tmp.path + "/python python3 -c pass";
  REQUIRE(std::system(("CXXRUN_STACK_FILE=" + theirs + " " + python).c_str()) == 0);
  CHECK(fs::file_size(theirs) == 0);
  // This user's own file is used, and made 0600.
  const std::string ours = tmp.path + "/ours.txt";
  std::ofstream(ours) << "";
  REQUIRE(chmod(ours.c_str(), 0644) == 0);
  REQUIRE(std::system(("CXXRUN_STACK_FILE=" + ours + " " + python).c_str()) == 0);
  CHECK(fs::file_size(ours) > 0);
  CHECK((fs::status(ours).permissions() & fs::perms::all) == (fs::perms::owner_read | fs::perms::owner_write));
}
