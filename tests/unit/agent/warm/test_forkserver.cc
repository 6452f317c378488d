// What a learning forkserver preloads (agent/warm/forkserver.h): the packages
// whose native code a worker mapped, read from /proc/<pid>/maps text.
#include <catch2/catch.hpp>

#include <set>
#include <string>

#include "agent/warm/forkserver.h"

using namespace cxxrun::agent;

namespace {

// Packages (with their __init__.py) on this pretend host.
bool has_init(const std::string& path) {
  static const std::set<std::string> inits = {
      "/usr/lib/python3/dist-packages/torch/__init__.py",
      "/usr/lib/python3/dist-packages/numpy/__init__.py",
      "/opt/venv/lib/python3.12/site-packages/torch/__init__.py",
      "/opt/venv/lib/python3.12/site-packages/triton/__init__.py",
  };
  return inits.count(path) > 0;
}

const char* kMaps =
    "55d0c0a00000-55d0c0a2c000 r--p 00000000 08:01 131 /usr/bin/python3.11\n"
    "7f1a00000000-7f1a00021000 rw-p 00000000 00:00 0 \n"
    "7f1a10000000-7f1a12000000 r-xp 00000000 08:01 200 /usr/lib/python3/dist-packages/numpy/core/"
    "_multiarray_umath.cpython-311-x86_64-linux-gnu.so\n"
    "7f1a20000000-7f1a28000000 r-xp 00000000 08:01 201 /usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so\n"
    "7f1a28000000-7f1a29000000 r--p 00000000 08:01 201 /usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so\n"
    "7f1a30000000-7f1a30100000 r-xp 00000000 08:01 202 /usr/lib/python3/dist-packages/numpy.libs/libgfortran.so\n"
    "7f1a40000000-7f1a40100000 r-xp 00000000 08:01 203 /usr/lib/python3/dist-packages/_cffi_backend.cpython.so\n"
    "7f1a50000000-7f1a50100000 r-xp 00000000 08:01 204 /usr/lib/x86_64-linux-gnu/libz.so.1.2.13\n"
    "7ffd00000000-7ffd00021000 rw-p 00000000 00:00 0 [stack]\n";

}  // namespace

TEST_CASE("forkserver: the packages a worker mapped native code of, in order, once each") {
  CHECK(native_packages(kMaps, has_init) == std::vector<std::string>{"numpy", "torch"});
}

TEST_CASE("forkserver: a namespace directory, a .libs directory and a top-level module are not packages") {
  const std::string maps =
      "7f-8f r-xp 0 0:0 1 /opt/venv/lib/python3.12/site-packages/nvidia/cudnn/lib/libcudnn.so.9\n"
      "7f-8f r-xp 0 0:0 1 /opt/venv/lib/python3.12/site-packages/torch/lib/libtorch_cuda.so\n"
      "7f-8f r-xp 0 0:0 1 /opt/venv/lib/python3.12/site-packages/torch.libs/libgomp.so\n"
      "7f-8f r-xp 0 0:0 1 /opt/venv/lib/python3.12/site-packages/triton/_C/libtriton.so\n";
  CHECK(native_packages(maps, has_init) == std::vector<std::string>{"torch", "triton"});
  CHECK(native_packages("", has_init).empty());
  CHECK(native_packages("7f-8f r-xp 0 0:0 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n", has_init).empty());
}

TEST_CASE("forkserver: torch is preloaded first, with torch.distributed; at most kMaxLearned in all") {
  CHECK(preload_for({"numpy", "torch"}) == std::vector<std::string>{"torch", "torch.distributed", "numpy"});
  CHECK(preload_for({"numpy"}) == std::vector<std::string>{"numpy"});
  CHECK(preload_for({}).empty());
  std::vector<std::string> many;
  for (int i = 0; i < 20; ++i) many.push_back("p" + std::to_string(i));
  CHECK(preload_for(many).size() == kMaxLearned);
}
