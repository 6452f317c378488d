// What a Python script imports at its top level, read from its source
// without running it: the default start method's sign, before any worker
// ran, that every worker will import torch (agent/warm/forkserver.h).
//
// Only statements at column 0 count: `import a.b as c, d`, `from a.b import
// x`, and simple statements after `;` on such a line. Those run whenever the
// module does; an import inside a function, a class, an `if` or a `try` may
// not, and is not reported (the agent then learns from the running workers
// instead). Strings (triple-quoted ones across lines included), comments,
// backslash continuations and bracketed continuation lines are skipped as
// Python's tokenizer would; relative imports (`from . import x`) are not
// reported.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace cxxrun::agent {

struct ScriptImport {
  std::string module;  // dotted, as written: "torch.distributed"
  int line = 0;        // 1-based
};

std::vector<ScriptImport> top_level_imports(std::string_view source);

// The script's source, at most kMaxScriptBytes of it (imports come first);
// nullopt when it cannot be read or is not text (a zip with a __main__.py).
inline constexpr size_t kMaxScriptBytes = 1 << 20;
std::optional<std::string> read_script(const std::string& path);

}  // namespace cxxrun::agent
