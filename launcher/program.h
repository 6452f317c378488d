// What each worker executes: torchrun's python/-m/--no-python/--run-path
// modes, plus running a native binary or non-Python script directly when the
// file says it is one (so `cxxrun ./train` works for a C++ program).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "launcher/environment.h"
#include "launcher/errors.h"
#include "launcher/raw_options.h"

namespace cxxrun::launcher {

struct ProgramRequest {
  std::string program;  // training_script
  std::vector<std::string> args;
  // Words the launcher adds between the program's name and `args`, where
  // torch.distributed.launch puts --local-rank (local_rank_args).
  std::vector<std::string> launcher_args;
  bool module = false;
  bool no_python = false;
  bool run_path = false;
};

struct Program {
  std::vector<std::string> command;  // passed to execvp: a bare name is looked up on PATH
  std::string entrypoint_name;
  // command is [python, -u, ...]: a script, -m module or --run-path.
  bool python = false;
  std::string script;  // the Python source file it runs, as given; "" for -m
};

// Checks that the program can run (a file that exists and is executable or
// readable, as the mode needs; the interpreter on PATH) and builds the argv.
// The interpreter is $PYTHON_EXEC, else "python3". Throws UsageError.
Program build_program(const ProgramRequest& request, const Env& env);

// --append-local-rank: python -m torch.distributed.launch without --use-env
// gives each worker "--local-rank=N" (torch >= 2.0) or "--local_rank=N" (torch
// 1.x), and scripts written for it declare that option and fail without it.
// `value` is dash or underscore; nullptr (not given) gives nothing. The agent
// replaces "${local_rank}" in the command with each worker's local rank.
std::vector<std::string> local_rank_args(const RawValue* value);

// execvp's search: each directory of `path` ("" = current directory) for an
// executable regular file called `name`.
std::optional<std::string> find_on_path(const std::string& name, const std::string& path);

}  // namespace cxxrun::launcher
