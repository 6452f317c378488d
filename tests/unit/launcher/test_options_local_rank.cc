// --append-local-rank: torch.distributed.launch's --local-rank argument,
// placed where that launcher puts it (right after the program's name).
#include "agent/process/worker_env_writer.h"
#include "options_fixture.h"

namespace {

using LocalRankArgs = std::vector<std::string>;

struct Python {
  TempDir dir;
  Env env = base_env();
  std::string python = dir.file("python", "#!/bin/sh\n", 0755);
  std::string script = dir.file("train.py", "print('hi')\n", 0644);
  Python() { env["PYTHON_EXEC"] = python; }
  // The worker command for `args` + the script, no arguments of its own.
  LocalRankArgs command(LocalRankArgs args) {
    args.push_back(script);
    return run(args, env).config.command;
  }
  LocalRankArgs with(const std::string& local_rank) { return {python, "-u", script, local_rank}; }
};

const std::string kDash = "--local-rank=${local_rank}";
const std::string kUnderscore = "--local_rank=${local_rank}";

}  // namespace

TEST_CASE("local rank argument: dash by default, underscore on request, after the program") {
  Python py;
  CHECK(run({"--append-local-rank", py.script, "--lr", "0.1"}, py.env).config.command ==
        LocalRankArgs{py.python, "-u", py.script, kDash, "--lr", "0.1"});
  CHECK(run({"--append-local-rank=dash", py.script}, py.env).config.command ==
        LocalRankArgs{py.python, "-u", py.script, kDash});
  CHECK(run({"--append_local_rank=underscore", py.script, "a"}, py.env).config.command ==
        LocalRankArgs{py.python, "-u", py.script, kUnderscore, "a"});
  // Not given: nothing added, as torchrun (use_env) does.
  CHECK(run({py.script, "a"}, py.env).config.command == LocalRankArgs{py.python, "-u", py.script, "a"});
}

TEST_CASE("local rank argument: every program mode puts it right after the program's name") {
  Python py;
  CHECK(run({"--append-local-rank", "-m", "pkg.train", "a"}, py.env).config.command ==
        LocalRankArgs{py.python, "-u", "-m", "pkg.train", kDash, "a"});
  CHECK(run({"--append-local-rank", "--no-python", kProg, "a"}, py.env).config.command ==
        LocalRankArgs{kProg, kDash, "a"});
  CHECK(run({"--append-local-rank", kProg}, py.env).config.command == LocalRankArgs{kProg, kDash});
  // python -u -c <runpy code> script ...
  LocalRankArgs run_path = run({"--append-local-rank", "--run-path", py.script, "a"}, py.env).config.command;
  REQUIRE(run_path.size() == 7);
  CHECK(LocalRankArgs(run_path.begin() + 4, run_path.end()) == LocalRankArgs{py.script, kDash, "a"});
}

TEST_CASE("local rank argument: each worker gets its own local rank") {
  Python py;
  LocalRankArgs command =
      run({"--append-local-rank=underscore", "--nproc-per-node=2", py.script, "x"}, py.env)
          .config.command;
  CHECK(cxxrun::agent::substitute_local_rank(command, 0) ==
        LocalRankArgs{py.python, "-u", py.script, "--local_rank=0", "x"});
  CHECK(cxxrun::agent::substitute_local_rank(command, 1) ==
        LocalRankArgs{py.python, "-u", py.script, "--local_rank=1", "x"});
}

TEST_CASE("local rank argument: its value comes only after '=', never from the next word") {
  Python py;
  // "--append-local-rank train.py": train.py is the program, not a value.
  Parsed p = run({"--append-local-rank", py.script, "underscore"}, py.env);
  CHECK(p.config.command == LocalRankArgs{py.python, "-u", py.script, kDash, "underscore"});
  // Abbreviated like any other option; the last one given wins.
  CHECK(py.command({"--append=underscore"}) == py.with(kUnderscore));
  CHECK(py.command({"--append-local-rank=underscore", "--append-local-rank"}) == py.with(kDash));
}

TEST_CASE("local rank argument: PET_APPEND_LOCAL_RANK stands in for it; the command line wins") {
  Python py;
  py.env["PET_APPEND_LOCAL_RANK"] = "underscore";
  CHECK(py.command({}) == py.with(kUnderscore));
  CHECK(py.command({"--append-local-rank"}) == py.with(kDash));
  py.env["PET_APPEND_LOCAL_RANK"] = "yes";
  CHECK(failure({py.script}, py.env).message ==
        "PET_APPEND_LOCAL_RANK=yes: invalid choice (choose from dash, underscore)");
}

TEST_CASE("local rank argument: a bad value is refused by name, with the choices") {
  CHECK(refusal({"--append-local-rank=Dash"}) ==
        "--append-local-rank=Dash: invalid choice (choose from dash, underscore)");
  CHECK(refusal({"--append-local-rank="}) ==
        "--append-local-rank=: invalid choice (choose from dash, underscore)");
  // Before the program is even looked at: the value's syntax comes first.
  CHECK_THAT(failure({"--append-local-rank=1"}).message,
             Contains("--append-local-rank=1: invalid choice"));
}

TEST_CASE("local rank argument: in --help") {
  std::string help = help_text();
  CHECK_THAT(help, Contains("[--append-local-rank[={dash,underscore}]]"));
  CHECK_THAT(help, Contains("--append-local-rank[={dash,underscore}], "
                            "--append_local_rank[={dash,underscore}]"));
  CHECK_THAT(help, Contains("torch.distributed.launch"));
}
