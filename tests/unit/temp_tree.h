// A temporary directory removed with everything in it on scope exit, and a
// writer of files anywhere under it: the fake /proc, /sys/fs/cgroup and
// /dev/kmsg trees of the kernel-evidence tests.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

struct TempDir {
  std::string path;
  TempDir() {
    char name[] = "/tmp/kernel-evidence-XXXXXX";
    REQUIRE(mkdtemp(name));
    path = name;
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  }
};

// Writes `text` to `path`, making its directories first.
inline void write_file(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}
