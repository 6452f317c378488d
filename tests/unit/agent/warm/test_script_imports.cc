// What a Python script imports at its top level (agent/warm/script_imports.h):
// the default start method's sign that every worker will import torch.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "agent/warm/script_imports.h"

using namespace cxxrun::agent;

namespace {

std::vector<std::pair<std::string, int>> imports(const std::string& source) {
  std::vector<std::pair<std::string, int>> out;
  for (const auto& i : top_level_imports(source)) out.emplace_back(i.module, i.line);
  return out;
}

using List = std::vector<std::pair<std::string, int>>;

}  // namespace

TEST_CASE("script imports: statements at column 0, with their line") {
  const struct {
    const char* source;
    List expected;
  } cases[] = {
      {"import torch\n", {{"torch", 1}}},
      {"import os\nimport torch.distributed as dist\n", {{"os", 1}, {"torch.distributed", 2}}},
      {"import os, torch as t ,  numpy\n", {{"os", 1}, {"torch", 1}, {"numpy", 1}}},
      {"from torch.nn.parallel import DistributedDataParallel as DDP\n", {{"torch.nn.parallel", 1}}},
      {"from torch import(nn)\n", {{"torch", 1}}},
      {"from torch import (\n    nn,\n    optim,\n)\nimport json\n", {{"torch", 1}, {"json", 5}}},
      {"import os; import torch\n", {{"os", 1}, {"torch", 1}}},
      {"import torch  # the model\n", {{"torch", 1}}},
      {"import \\\n    torch\n", {{"torch", 1}}},
      {"import torch\r\nimport os\r\n", {{"torch", 1}, {"os", 2}}},
      {"#!/usr/bin/env python3\n# import torch\nimport sys", {{"sys", 3}}},
      // Conditional or nested: may never run.
      {"def main():\n    import torch\n", {}},
      {"if True:\n\timport torch\n", {}},
      {"try:\n    import torch\nexcept ImportError:\n    torch = None\n", {}},
      {"if x: import torch\n", {}},
      {"class A:\n  import torch\n", {}},
      // Not statements of the module.
      {"\"\"\"Usage:\nimport torch\n\"\"\"\nimport os\n", {{"os", 4}}},
      {"x = '''\nimport torch\n'''\n", {}},
      {"s = \"a \\\" import torch\"\nimport os\n", {{"os", 2}}},
      {"print(\n'x',\n)\nimport os\n", {{"os", 4}}},
      {"d = {\nimport_torch: 1,\n}\n", {}},
      {"x = [1,\nimport torch\n", {}},  // inside a bracket that never closes
      {"importtorch\nfromage = 1\nimport\n", {}},
      // Relative imports name no package.
      {"from . import models\nfrom .models import net\n", {}},
  };
  for (const auto& c : cases) {
    INFO(c.source);
    CHECK(imports(c.source) == c.expected);
  }
}

TEST_CASE("script imports: a script is read as text; a zip or a missing file is not") {
  char name[] = "/tmp/cxxrun_script_imports_XXXXXX";
  const int fd = mkstemp(name);
  REQUIRE(fd >= 0);
  close(fd);
  const std::string path = name;
  {
    std::ofstream(path) << "import torch\n";
  }
  auto text = read_script(path);
  REQUIRE(text.has_value());
  CHECK(*text == "import torch\n");
  {
    std::ofstream out(path, std::ios::binary);
    out << "PK\x03\x04" << std::string(1, '\0') << "import torch\n";
  }
  CHECK_FALSE(read_script(path).has_value());
  std::remove(path.c_str());
  CHECK_FALSE(read_script(path).has_value());
}
