#include "launcher/program.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "launcher/values.h"

namespace cxxrun::launcher {
namespace {

// Runs the script as a __main__ module inside this interpreter, with argv as
// the script expects it (torchrun's run_script_path, minus the in-agent call).
constexpr const char* kRunPathCode =
    "import runpy,sys; sys.argv=sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')";

// glibc execvp's default when PATH is unset (confstr _CS_PATH).
constexpr const char* kDefaultPath = "/bin:/usr/bin";

enum class FileKind { missing, directory, elf, native_script, python_or_unknown, other };

struct FileInfo {
  FileKind kind = FileKind::missing;
  bool executable = false;
  bool readable = false;
  std::string shebang;
};

std::string in_quotes(const std::string& s) { return "'" + s + "'"; }

FileInfo inspect(const std::string& path) {
  FileInfo info;
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return info;
  info.readable = access(path.c_str(), R_OK) == 0;
  if (S_ISDIR(st.st_mode)) {
    info.kind = FileKind::directory;
    return info;
  }
  if (!S_ISREG(st.st_mode)) {
    info.kind = FileKind::other;
    return info;
  }
  info.executable = access(path.c_str(), X_OK) == 0;
  info.kind = FileKind::python_or_unknown;

  std::ifstream in(path, std::ios::binary);
  char head[512] = {};
  in.read(head, sizeof head);
  std::string bytes(head, static_cast<size_t>(in.gcount()));
  if (bytes.starts_with("\177ELF")) {
    info.kind = FileKind::elf;
  } else if (bytes.starts_with("#!")) {
    info.shebang = bytes.substr(0, bytes.find('\n'));
    if (info.shebang.find("python") == std::string::npos) info.kind = FileKind::native_script;
  }
  return info;
}

bool is_executable_file(const std::string& path) {
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string env_or(const Env& env, const std::string& name, const std::string& fallback) {
  auto it = env.find(name);
  return it == env.end() ? fallback : it->second;
}

std::string search_path(const Env& env) { return env_or(env, "PATH", kDefaultPath); }

// The interpreter must exist now, not fail in every worker later.
std::string python(const Env& env) {
  auto it = env.find("PYTHON_EXEC");
  std::string exe = it == env.end() ? "python3" : it->second;
  if (exe.find('/') != std::string::npos) {
    if (!is_executable_file(exe))
      throw UsageError("PYTHON_EXEC=" + exe + ": not an executable file");
  } else if (!find_on_path(exe, search_path(env))) {
    throw UsageError("python interpreter " + in_quotes(exe) +
                     " not found on PATH (set PYTHON_EXEC to choose one)");
  }
  return exe;
}

void require_python_script(const std::string& script) {
  FileInfo info = inspect(script);
  if (info.kind == FileKind::missing)
    throw UsageError("training script " + in_quotes(script) + " not found");
  if (!info.readable) throw UsageError("training script " + in_quotes(script) + " is not readable");
  if (info.kind == FileKind::other)
    throw UsageError("training script " + in_quotes(script) + " is not a regular file");
}

// --no-python: execvp semantics. A name without '/' is looked up on PATH only.
void require_executable(const std::string& program, const Env& env) {
  if (program.find('/') == std::string::npos) {
    if (find_on_path(program, search_path(env))) return;
    std::string hint = is_executable_file(program)
                           ? " (write ./" + program + " for the file in this directory)"
                           : "";
    throw UsageError("program " + in_quotes(program) + " not found on PATH" + hint);
  }
  FileInfo info = inspect(program);
  if (info.kind == FileKind::missing) throw UsageError("program " + in_quotes(program) + " not found");
  if (info.kind == FileKind::directory || info.kind == FileKind::other)
    throw UsageError("program " + in_quotes(program) + " is not a regular file");
  if (!info.executable) throw UsageError("program " + in_quotes(program) + " is not executable");
}

// Every mode's command ends with the program's name (script, module or
// binary): the launcher's words go right after it, then the program's own.
Program with_args(std::vector<std::string> head, const ProgramRequest& request, std::string name) {
  head.insert(head.end(), request.launcher_args.begin(), request.launcher_args.end());
  head.insert(head.end(), request.args.begin(), request.args.end());
  Program p;
  p.command = std::move(head);
  p.entrypoint_name = std::move(name);
  return p;
}

Program python_program(std::vector<std::string> head, const ProgramRequest& request, std::string name) {
  Program p = with_args(std::move(head), request, std::move(name));
  p.python = true;
  if (!request.module) p.script = request.program;
  return p;
}

// No mode flag: torchrun would always run `python -u script`. We look at the
// file first and exec native programs directly.
Program auto_mode(const ProgramRequest& request, const Env& env) {
  const std::string& program = request.program;
  bool bare = program.find('/') == std::string::npos;
  FileInfo info = inspect(program);

  if (info.kind == FileKind::missing) {
    // `cxxrun hostname`: a program on PATH rather than a script here.
    if (bare && find_on_path(program, search_path(env)))
      return with_args({program}, request, program);
    throw UsageError("training script " + in_quotes(program) + " not found");
  }
  if (info.kind == FileKind::elf || info.kind == FileKind::native_script) {
    if (!info.executable) {
      std::string what =
          info.kind == FileKind::elf ? "an ELF binary" : "a script for " + info.shebang.substr(2);
      throw UsageError(in_quotes(program) + " is " + what + " but is not executable (chmod +x it)");
    }
    // execvp would search PATH for a bare name; the user meant this file.
    std::string exe = bare ? "./" + program : program;
    return with_args({exe}, request, program);
  }
  require_python_script(program);
  return python_program({python(env), "-u", program}, request, program);
}

}  // namespace

std::optional<std::string> find_on_path(const std::string& name, const std::string& path) {
  if (name.empty()) return std::nullopt;
  size_t start = 0;
  for (;;) {
    size_t colon = path.find(':', start);
    std::string dir =
        path.substr(start, colon == std::string::npos ? std::string::npos : colon - start);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    if (is_executable_file(candidate)) return candidate;
    if (colon == std::string::npos) return std::nullopt;
    start = colon + 1;
  }
}

std::vector<std::string> local_rank_args(const RawValue* value) {
  if (value == nullptr) return {};
  check_choice(*value, {"dash", "underscore"});
  return {value->text == "dash" ? "--local-rank=${local_rank}" : "--local_rank=${local_rank}"};
}

Program build_program(const ProgramRequest& request, const Env& env) {
  // Same precedence as torchrun: --run-path, then --no-python, then -m.
  if (request.run_path) {
    require_python_script(request.program);
    return python_program({python(env), "-u", "-c", kRunPathCode, request.program}, request,
                          request.program);
  }
  if (request.no_python) {
    if (request.module)
      throw UsageError(
          "Don't use both the '--no-python' flag and the '--module' flag at the same time.");
    require_executable(request.program, env);
    return with_args({request.program}, request, request.program);
  }
  if (request.module)
    return python_program({python(env), "-u", "-m", request.program}, request, request.program);
  return auto_mode(request, env);
}

}  // namespace cxxrun::launcher
