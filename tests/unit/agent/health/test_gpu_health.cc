// GpuHealth against the fake NVML (tests/fake_nvml/fake_nvml.c, built as
// libnvidia-ml.so.1 at FAKE_NVML_LIBRARY), loaded through
// CXXRUN_NVML_LIBRARY and driven by the state file FAKE_NVML_STATE names.
#include <stdlib.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/health/gpu_health.h"
#include "fake_nvml_env.h"

using namespace cxxrun::agent;
using namespace std::chrono_literals;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

// Two GPUs, healthy, at the PCI addresses of a real host.
const std::string kTwoGpus =
    "0.pci=00000000:3B:00.0\n0.uuid=GPU-aaaa1111-0000-0000-0000-000000000000\n"
    "1.pci=00000000:86:00.0\n1.uuid=GPU-bbbb2222-0000-0000-0000-000000000000\n";

std::unique_ptr<GpuHealth> open_fake(const std::optional<std::string>& visible = std::nullopt,
                                     std::chrono::milliseconds answer_within = kNvmlAnswerWithin) {
  std::string why_not;
  auto health = GpuHealth::open(visible, why_not, answer_within);
  INFO(why_not);
  REQUIRE(health != nullptr);
  return health;
}

GpuCheck named(const std::vector<GpuCheck>& checks, const std::string& name) {
  for (const GpuCheck& c : checks)
    if (c.name == name) return c;
  FAIL("no check named " << name);
  return {};
}

bool all_healthy(const std::vector<GpuCheck>& checks) {
  return std::all_of(checks.begin(), checks.end(), [](const GpuCheck& c) { return c.healthy; });
}

}  // namespace

TEST_CASE("a healthy host passes every GPU check", "[gpu]") {
  FakeNvml nvml;
  nvml.write(kTwoGpus);
  auto health = open_fake();
  CHECK(health->describe() == "2 GPUs (0000:3b:00.0, 0000:86:00.0)");
  const auto checks = health->check();
  REQUIRE(checks.size() == 4);
  CHECK(checks[0].name == "gpu-answers");
  CHECK(checks[1].name == "gpu-recovery-action");
  CHECK(checks[2].name == "gpu-memory-errors");
  CHECK(checks[3].name == "gpu-xid");
  CHECK(all_healthy(checks));
  CHECK(checks[0].detail == "all 2 GPUs answer (NVIDIA Fake H100)");
  CHECK(checks[1].detail == "none pending on 2 GPUs");
  CHECK(checks[3].detail == "no new Xid");
}

TEST_CASE("a GPU that is lost does not answer, named with its PCI bus id and NVML's words", "[gpu]") {
  FakeNvml nvml;
  nvml.write(kTwoGpus);
  auto health = open_fake();
  nvml.write(kTwoGpus + "1.lost=1\n");
  auto checks = health->check();
  CHECK_FALSE(named(checks, "gpu-answers").healthy);
  CHECK(named(checks, "gpu-answers").detail == "GPU 1 (0000:86:00.0) does not answer: GPU is lost");
  // The other checks look at the GPUs that answer; the lost one is reported once.
  CHECK(named(checks, "gpu-recovery-action").detail == "none pending on 1 GPU");

  // Lost before the agent started: NVML gives no handle, so no PCI bus id.
  auto late = open_fake();
  CHECK(late->describe() == "2 GPUs (0000:3b:00.0, GPU 1)");
  CHECK(named(late->check(), "gpu-answers").detail == "GPU 1 does not answer: GPU is lost");
  nvml.write(kTwoGpus);  // back on the bus
  CHECK(all_healthy(late->check()));
  CHECK(late->describe() == "2 GPUs (0000:3b:00.0, 0000:86:00.0)");
}

TEST_CASE("a pending recovery action is unhealthy, by name", "[gpu]") {
  FakeNvml nvml;
  nvml.write(kTwoGpus);
  auto health = open_fake();
  const std::pair<int, std::string> actions[] = {{1, "GPU reset required"},
                                                 {2, "node reboot required"},
                                                 {3, "drain peer-to-peer traffic"},
                                                 {4, "drain and reset"},
                                                 {9, "unknown recovery action 9"}};
  for (const auto& [action, words] : actions) {
    nvml.write(kTwoGpus + "0.recovery=" + std::to_string(action) + "\n");
    const GpuCheck c = named(health->check(), "gpu-recovery-action");
    CHECK_FALSE(c.healthy);
    CHECK_THAT(c.detail, Contains("GPU 0 (0000:3b:00.0): " + words));
  }
  nvml.write(kTwoGpus + "0.recovery=0\n");
  CHECK(named(health->check(), "gpu-recovery-action").healthy);
}

TEST_CASE("memory errors: a retired page pending, a row remapping failure, uncorrected ECC", "[gpu]") {
  FakeNvml nvml;
  nvml.write(kTwoGpus);
  auto health = open_fake();

  nvml.write(kTwoGpus + "1.retired_pending=1\n");
  GpuCheck c = named(health->check(), "gpu-memory-errors");
  CHECK_FALSE(c.healthy);
  CHECK(c.detail == "GPU 1 (0000:86:00.0): a retired page is pending: reset the GPU");

  nvml.write(kTwoGpus + "0.remap_failure=1\n");
  c = named(health->check(), "gpu-memory-errors");
  CHECK_FALSE(c.healthy);
  CHECK(c.detail == "GPU 0 (0000:3b:00.0): row remapping failed: the GPU needs service");

  nvml.write(kTwoGpus + "1.ecc_uncorrected=2\n");
  c = named(health->check(), "gpu-memory-errors");
  CHECK_FALSE(c.healthy);
  CHECK(c.detail == "GPU 1 (0000:86:00.0): 2 uncorrected ECC errors since its last reset (at most 0 allowed)");
  CHECK_FALSE(named(health->check(1), "gpu-memory-errors").healthy);
  c = named(health->check(2), "gpu-memory-errors");
  CHECK(c.healthy);
  CHECK_THAT(c.detail, Contains("more than 2 uncorrected ECC errors on 2 GPUs"));
}

TEST_CASE("an Xid between two checks is reported once, with its meaning", "[gpu]") {
  FakeNvml nvml;
  nvml.write(kTwoGpus);
  auto health = open_fake();
  CHECK(named(health->check(), "gpu-xid").healthy);

  nvml.write(kTwoGpus + "1.xids=79\n");
  GpuCheck c = named(health->check(), "gpu-xid");
  CHECK_FALSE(c.healthy);
  CHECK(c.detail == "Xid 79 on GPU 1 (0000:86:00.0): the GPU fell off the bus");
  c = named(health->check(), "gpu-xid");
  CHECK(c.healthy);
  CHECK(c.detail == "no new Xid");

  nvml.write(kTwoGpus + "1.xids=79,13,13\n0.xids=95\n");
  c = named(health->check(), "gpu-xid");
  CHECK_FALSE(c.healthy);
  CHECK_THAT(c.detail, Contains("Xid 13 on GPU 1 (0000:86:00.0): graphics engine exception"));
  CHECK_THAT(c.detail, Contains("(2 times)"));
  CHECK_THAT(c.detail, Contains("Xid 95 on GPU 0 (0000:3b:00.0): uncontained ECC error"));
  CHECK_THAT(c.detail, !Contains("Xid 79"));
  CHECK(named(health->check(), "gpu-xid").healthy);

  // The program's own page fault: said, but the node stays healthy.
  nvml.write(kTwoGpus + "1.xids=79,13,13,31\n0.xids=95\n");
  c = named(health->check(), "gpu-xid");
  CHECK(c.healthy);
  CHECK(c.detail == "Xid 31 on GPU 1 (0000:86:00.0): GPU memory page fault (often the program's own illegal address) "
                    "(most often the program's own fault: not held against the node)");
}

TEST_CASE("CUDA_VISIBLE_DEVICES chooses the GPUs checked, by index or UUID", "[gpu]") {
  FakeNvml nvml;
  // GPU 2 is broken in every way; only a job that sees it may fail.
  const std::string three = kTwoGpus +
                            "2.pci=00000000:AF:00.0\n2.uuid=GPU-cccc3333-0000-0000-0000-000000000000\n"
                            "2.recovery=1\n2.xids=48\n2.used=9000000000\n2.mig_uuid=MIG-dddd4444\n2.mig_used=0\n";
  nvml.write(three);

  auto first_two = open_fake("0,1");
  CHECK(first_two->describe() == "2 GPUs (0000:3b:00.0, 0000:86:00.0)");
  CHECK(all_healthy(first_two->check()));
  CHECK(first_two->wait_memory_drained(300ms, kGpuMemoryTolerance).healthy);

  auto by_uuid = open_fake("GPU-bbbb2222-0000-0000-0000-000000000000");
  CHECK(by_uuid->describe() == "1 GPU (0000:86:00.0)");
  CHECK(all_healthy(by_uuid->check()));

  auto by_prefix = open_fake("GPU-cccc");
  CHECK(by_prefix->describe() == "1 GPU (0000:af:00.0)");
  auto checks = by_prefix->check();
  CHECK(named(checks, "gpu-recovery-action").detail == "GPU 2 (0000:af:00.0): GPU reset required");
  CHECK_THAT(named(checks, "gpu-xid").detail, Contains("Xid 48 on GPU 2 (0000:af:00.0): double-bit ECC error"));

  // As CUDA reads it: the list ends at the first entry that names no GPU.
  auto cut = open_fake("1,7,2");
  CHECK(cut->describe() ==
        "1 GPU (0000:86:00.0); CUDA_VISIBLE_DEVICES ends at \"7\", which names no further GPU, as CUDA reads it");
  CHECK(all_healthy(cut->check()));
  CHECK(open_fake("0,0,2")->describe() ==
        "1 GPU (0000:3b:00.0); CUDA_VISIBLE_DEVICES ends at \"0\", which names no further GPU, as CUDA reads it");

  auto none = open_fake("");
  CHECK(none->describe() == "no GPU visible (CUDA_VISIBLE_DEVICES is empty)");
  checks = none->check();
  CHECK(all_healthy(checks));
  CHECK(named(checks, "gpu-answers").detail == "no GPU visible (CUDA_VISIBLE_DEVICES is empty)");
  CHECK(named(checks, "gpu-xid").detail == "no GPU to check");
  CHECK(none->wait_memory_drained(300ms, kGpuMemoryTolerance).detail == "no GPU to check");

  // A MIG instance: its GPU's health, its own memory (the rest of GPU 2 is
  // someone else's).
  auto mig = open_fake("MIG-dddd4444");
  CHECK(mig->describe() == "1 GPU (MIG-dddd4444 on 0000:af:00.0)");
  CHECK(named(mig->check(), "gpu-recovery-action").detail == "GPU 2 (0000:af:00.0): GPU reset required");
  CHECK(mig->wait_memory_drained(300ms, kGpuMemoryTolerance).healthy);
  nvml.write(three + "2.mig_used=2147483648\n2.mig_pids=77\n");
  const GpuCheck drained = mig->wait_memory_drained(300ms, kGpuMemoryTolerance);
  CHECK_FALSE(drained.healthy);
  CHECK(drained.detail ==
        "MIG-dddd4444 on GPU 2 (0000:af:00.0) still holds 2.0 GiB after 0.3 s, 2.0 GiB more than when the job started "
        "(1 process: pid 77)");
}

TEST_CASE("GPU memory drains, or the wait names who holds it", "[gpu]") {
  FakeNvml nvml;
  nvml.write(kTwoGpus + "0.used=300000000\n");  // under 512 MiB: the driver's own
  auto health = open_fake();

  SECTION("already drained: healthy at once") {
    const auto start = std::chrono::steady_clock::now();
    const GpuCheck c = health->wait_memory_drained(10s, kGpuMemoryTolerance);
    CHECK(c.healthy);
    CHECK(c.name == "gpu-memory-drained");
    CHECK_THAT(c.detail, Contains("memory back within 512 MiB of where it was when the job started on 2 GPUs in 0 s"));
    CHECK(std::chrono::steady_clock::now() - start < 1s);
  }
  SECTION("never drains: unhealthy after the limit, naming memory and processes") {
    nvml.write(kTwoGpus + "1.used=13207024435\n1.pids=4242,4243\n");
    const auto start = std::chrono::steady_clock::now();
    const GpuCheck c = health->wait_memory_drained(300ms, kGpuMemoryTolerance);
    const auto took = std::chrono::steady_clock::now() - start;
    CHECK_FALSE(c.healthy);
    CHECK(c.detail == "GPU 1 (0000:86:00.0) still holds 12.3 GiB after 0.3 s, 12.3 GiB more than when the job started "
                     "(2 processes: pids 4242, 4243)");
    CHECK(took >= 300ms);
    CHECK(took < 2s);
  }
  SECTION("drains midway: healthy once it has") {
    nvml.write(kTwoGpus + "1.used=13207024435\n1.pids=4242\n");
    std::thread exits([&] {
      std::this_thread::sleep_for(200ms);
      nvml.write(kTwoGpus + "1.used=104857600\n");
    });
    const auto start = std::chrono::steady_clock::now();
    const GpuCheck c = health->wait_memory_drained(5s, kGpuMemoryTolerance);
    const auto took = std::chrono::steady_clock::now() - start;
    exits.join();
    CHECK(c.healthy);
    CHECK(took >= 200ms);
    CHECK(took < 3s);
  }
  SECTION("a GPU that stops answering ends the wait at once") {
    nvml.write(kTwoGpus + "1.used=13207024435\n1.lost=1\n");
    const auto start = std::chrono::steady_clock::now();
    const GpuCheck c = health->wait_memory_drained(10s, kGpuMemoryTolerance);
    CHECK_FALSE(c.healthy);
    CHECK(c.detail == "GPU 1 (0000:86:00.0) does not answer: GPU is lost");
    CHECK(std::chrono::steady_clock::now() - start < 2s);
  }
}

// Seen on an H200 with driver 580.159.04: an idle GPU's `used` is 615 MiB,
// the driver's reservation, more than the 512 MiB tolerance; measured from
// zero, every restart waited 50 s and stepped out.
TEST_CASE("GPU memory drains back to where it was when the job started", "[gpu]") {
  FakeNvml nvml;
  nvml.write(kTwoGpus + "0.used=644874240\n1.used=3221225472\n1.pids=900\n");  // reserved; someone else's 3 GiB
  auto health = open_fake();
  SECTION("an idle GPU whose driver reserves more than the tolerance is drained") {
    const auto start = std::chrono::steady_clock::now();
    CHECK(health->wait_memory_drained(10s, kGpuMemoryTolerance).healthy);
    CHECK(std::chrono::steady_clock::now() - start < 1s);
  }
  SECTION("what the last attempt left above that is waited for") {
    nvml.write(kTwoGpus + "0.used=644874240\n1.used=5368709120\n1.pids=900,4242\n");
    const GpuCheck c = health->wait_memory_drained(300ms, kGpuMemoryTolerance);
    CHECK_FALSE(c.healthy);
    CHECK(c.detail == "GPU 1 (0000:86:00.0) still holds 5.0 GiB after 0.3 s, 2.0 GiB more than when the job started "
                      "(2 processes: pids 900, 4242)");
  }
}

TEST_CASE("what the driver cannot tell is not checked, and healthy", "[gpu]") {
  FakeNvml nvml;
  const std::string unsupported = "0.unsupported=recovery,retired_pages,remapped_rows,ecc,events\n"
                                  "1.unsupported=recovery,retired_pages,remapped_rows,ecc,events\n";
  nvml.write(kTwoGpus + unsupported + "0.recovery=1\n0.ecc_uncorrected=5\n");
  auto health = open_fake();
  const auto checks = health->check();
  CHECK(all_healthy(checks));
  CHECK(named(checks, "gpu-recovery-action").detail ==
        "recovery action not checked on GPU 0, GPU 1 (Not Supported)");
  CHECK_THAT(named(checks, "gpu-memory-errors").detail, Contains("ECC errors not checked on GPU 0, GPU 1 (Not Supported)"));
  CHECK_THAT(named(checks, "gpu-memory-errors").detail, Contains("retired pages not checked on GPU 0, GPU 1"));
  CHECK_THAT(named(checks, "gpu-memory-errors").detail, Contains("row remapping not checked on GPU 0, GPU 1"));
  CHECK(named(checks, "gpu-xid").detail == "Xid events not checked on GPU 0, GPU 1 (Not Supported)");
}

TEST_CASE("no NVML or no driver: no GPU checks, and a broken driver is unhealthy", "[gpu]") {
  FakeNvml nvml;
  std::string why_not;
  SECTION("no library") {
    setenv("CXXRUN_NVML_LIBRARY", "/nonexistent/libnvidia-ml.so.1", 1);
    CHECK(GpuHealth::open(std::nullopt, why_not) == nullptr);
    CHECK_THAT(why_not, Contains("no NVML at /nonexistent/libnvidia-ml.so.1"));
  }
  SECTION("a library that is not NVML") {
    setenv("CXXRUN_NVML_LIBRARY", "libc.so.6", 1);
    CHECK(GpuHealth::open(std::nullopt, why_not) == nullptr);
    CHECK(why_not == "libc.so.6 lacks nvmlInit_v2: a driver older than R525, which cxxrun checks no GPU with");
  }
  SECTION("NVML without a driver loaded") {
    // No state file: the fake's nvmlInit_v2 says NVML_ERROR_DRIVER_NOT_LOADED.
    CHECK(GpuHealth::open(std::nullopt, why_not) == nullptr);
    CHECK(why_not == "no NVIDIA driver: NVML says Driver Not Loaded");
  }
  SECTION("a driver that cannot start is unhealthy until it can") {
    nvml.write(kTwoGpus + "init_error=18\n");
    auto health = open_fake();
    CHECK(health->describe() == "NVML cannot start: RM has detected an NVML/RM version mismatch.");
    const auto checks = health->check();
    REQUIRE(checks.size() == 1);
    CHECK_FALSE(checks[0].healthy);
    CHECK(checks[0].detail == "NVML cannot start: RM has detected an NVML/RM version mismatch.");
    nvml.write(kTwoGpus);
    CHECK(all_healthy(health->check()));
    CHECK(health->describe() == "2 GPUs (0000:3b:00.0, 0000:86:00.0)");
  }
}

TEST_CASE("NVML that hangs costs a check its deadline, not the caller", "[gpu]") {
  FakeNvml nvml;
  nvml.write(kTwoGpus);
  auto health = open_fake(std::nullopt, 300ms);
  nvml.write(kTwoGpus + "slow_ms=1500\n");
  auto start = std::chrono::steady_clock::now();
  auto checks = health->check();
  CHECK(std::chrono::steady_clock::now() - start < 1s);
  REQUIRE(checks.size() == 1);
  CHECK_FALSE(checks[0].healthy);
  CHECK(checks[0].detail == "NVML did not answer within 0.3 s (a GPU or the driver hangs)");
  // Still stuck: the next call says so at once instead of queueing behind it.
  start = std::chrono::steady_clock::now();
  const GpuCheck drained = health->wait_memory_drained(5s, kGpuMemoryTolerance);
  CHECK(std::chrono::steady_clock::now() - start < 200ms);
  CHECK_FALSE(drained.healthy);
  CHECK_THAT(drained.detail, Contains("NVML has not answered for"));

  nvml.write(kTwoGpus);  // the driver recovers: the stuck call ends within 1.5 s
  bool recovered = false;
  for (int i = 0; i < 50 && !recovered; ++i) {
    std::this_thread::sleep_for(100ms);
    recovered = all_healthy(health->check());
  }
  CHECK(recovered);
}
