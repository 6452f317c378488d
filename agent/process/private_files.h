// Files and directories only the job's user may touch, whatever the umask,
// created without following a link another user planted: the run directory
// and everything cxxrun writes in it (agent/workers/log_dir.h), the Python hook that
// every worker executes (agent/python/hook.h), the hang bundles
// (agent/hang/stack_dump.h), the duplicate filters' files, worker logs, heartbeat
// pages. Directories are 0700 and files 0600, as torchrun's `mkdtemp` run
// directory: on a shared machine nothing a job writes is readable by, or
// writable by, another local user, and nothing another user can write is
// ever executed by a worker (docs/torchrun-compat.md §6).
#pragma once

#include <cstdio>
#include <string>

namespace cxxrun::agent {

// Creates `path` as a new directory, mode 0700 exactly. Fails (false, errno
// set; EEXIST when anything, a link included, is there already) rather than
// taking over an entry it did not make.
bool make_private_dir(const std::string& path);

// `path` as a directory of ours: made 0700 when missing; when there, it must
// be a directory itself (not a link to one) owned by this user, and is then
// set to 0700. False with the reason in words otherwise.
bool ensure_private_dir(const std::string& path, std::string& why_not);

// `path` and its missing parents, as `mkdir -p`: each directory it makes is
// 0700 whatever the umask; those already there are left as they are. False
// with the reason in words (a component that is not a directory included).
bool make_private_dirs(const std::string& path, std::string& why_not);

// Opens `path` write-only, created 0600 (an existing file of ours is set to
// 0600), never through a link at its last component. `fresh`: fails with
// EEXIST when anything is there. `truncate`: an existing file is emptied,
// once it is known to be a regular file of ours (O_TRUNC on open would empty
// another user's first). A character device (/dev/null, /dev/full: only root
// makes one) is opened as it is. Close-on-exec. -1 with errno set (ELOOP for
// a link, EPERM for a file that is not ours, a FIFO or a socket).
int open_private_file(const std::string& path, bool fresh, bool truncate);

// A directory, `dir` itself or one above it, that lets a user other than
// this one (or root) rename or replace what is in it: writable by its group
// or others without the sticky bit, or owned by another user. Looked up
// along both `dir` as written and its real path. "" when there is none:
// then what this user makes under `dir` stays where it was made, so a file
// there may be executed. A path that cannot be read counts as replaceable.
std::string replaceable_by_others(const std::string& dir);

// Where to make a private temporary directory (mkdtemp) that a worker will
// execute from: the first of $TMPDIR, /tmp and /dev/shm that no other user
// can replace (replaceable_by_others); "" when none.
std::string safe_temp_base();

// The absolute path of the program `name` as $PATH finds it (execvp's
// default when unset), for what cxxrun runs of its own accord (eu-stack at
// a hang): a relative entry (empty, ".") is skipped, since it names the
// current directory, which may be one that others can write, and so is a
// directory that another user can replace (replaceable_by_others). "" when
// no entry holds it.
std::string trusted_program(const std::string& name);

// Opens a file the user named (--event-log, --exclude-file) with `flags`
// (O_CREAT's mode 0600). Its last component is followed when it is a link
// of this user's or root's making, the user's own choice, never one another
// user planted in a directory they can write, which would make cxxrun write
// where they chose. -1 with the reason in `why` (errno set) when not.
int open_named_file(const std::string& path, int flags, std::string& why);

// open_private_file(path, false, true) as a stdio stream; nullptr with errno.
std::FILE* open_private_stream(const std::string& path);

// Writes `text` to a new 0600 file at `path` (fresh, or an existing regular
// file of ours, emptied). False with the reason in words.
bool write_private_file(const std::string& path, const std::string& text, bool fresh, std::string& why_not);

}  // namespace cxxrun::agent
