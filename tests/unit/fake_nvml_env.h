// Points this test process at the fake NVML (tests/fake_nvml/fake_nvml.c,
// built as libnvidia-ml.so.1 at FAKE_NVML_LIBRARY, loaded through
// CXXRUN_NVML_LIBRARY) and a state file of its own (FAKE_NVML_STATE), for
// the tests of what reads NVML: the health checks and the GPU clocks.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>

class FakeNvml {
 public:
  FakeNvml() {
    char dir[] = "/tmp/cxxrun-fake-nvml-XXXXXX";
    REQUIRE(mkdtemp(dir) != nullptr);
    dir_ = dir;
    setenv("CXXRUN_NVML_LIBRARY", FAKE_NVML_LIBRARY, 1);
    setenv("FAKE_NVML_STATE", (dir_ / "state").c_str(), 1);
  }
  ~FakeNvml() {
    unsetenv("CXXRUN_NVML_LIBRARY");
    unsetenv("FAKE_NVML_STATE");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  FakeNvml(const FakeNvml&) = delete;
  FakeNvml& operator=(const FakeNvml&) = delete;
  // Replaces the state whole (a rename: the fake never reads half a file).
  void write(const std::string& state) const {
    const std::filesystem::path next = dir_ / "state.next";
    std::ofstream(next) << state;
    std::filesystem::rename(next, dir_ / "state");
  }

 private:
  std::filesystem::path dir_;
};
