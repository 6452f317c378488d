#include "options_fixture.h"

TEST_CASE("the program must exist and be runnable") {
  TempDir dir;
  CHECK_THAT(failure({}).message, Contains("missing the training program"));
  CHECK_THAT(failure({"--nproc-per-node=2"}).message, Contains("missing the training program"));
  std::string missing = (dir.path / "nope.py").string();
  CHECK_THAT(failure({missing}).message, Contains("'" + missing + "' not found"));
  CHECK_THAT(failure({"--no-python", missing}).message, Contains("not found"));
  CHECK_THAT(failure({"--no-python", "no-such-program-xyz"}).message,
             Contains("not found on PATH"));
  std::string data = dir.file("data.txt", "hello", 0644);
  CHECK_THAT(failure({"--no-python", data}).message, Contains("not executable"));
  std::string elf = dir.file("train", kElf, 0644);
  CHECK_THAT(failure({elf}).message, Contains("ELF binary but is not executable"));
  std::string sh = dir.file("run.sh", "#!/bin/bash\necho hi\n", 0644);
  CHECK_THAT(failure({sh}).message, Contains("not executable"));
  CHECK_THAT(failure({"--run-path", missing}).message, Contains("not found"));
}

TEST_CASE("program mode: native files run directly, the rest through python") {
  TempDir dir;
  Env env = base_env();
  std::string fake_python = dir.file("python", "#!/bin/sh\n", 0755);
  env["PYTHON_EXEC"] = fake_python;

  std::string elf = dir.file("train", kElf, 0755);
  Parsed p = run({elf, "--lr", "0.1"}, env);
  CHECK(p.config.command == std::vector<std::string>{elf, "--lr", "0.1"});
  CHECK(p.config.entrypoint_name == elf);

  std::string sh = dir.file("run.sh", "#!/bin/bash\necho hi\n", 0755);
  CHECK(run({sh, "a"}, env).config.command == std::vector<std::string>{sh, "a"});

  std::string exec_py = dir.file("tool.py", "#!/usr/bin/env python3\nprint(1)\n", 0755);
  CHECK(run({exec_py, "a"}, env).config.command ==
        std::vector<std::string>{fake_python, "-u", exec_py, "a"});

  std::string script = dir.file("train.py", "print('hi')\n", 0644);
  p = run({script, "--epochs", "3"}, env);
  CHECK(p.config.command == std::vector<std::string>{fake_python, "-u", script, "--epochs", "3"});
  CHECK(p.config.entrypoint_name == script);

  p = run({"-m", "pkg.not_checked", "x"}, env);
  CHECK(p.config.command ==
        std::vector<std::string>{fake_python, "-u", "-m", "pkg.not_checked", "x"});
  CHECK(p.config.entrypoint_name == "pkg.not_checked");

  p = run({"--no-python", elf, "x"}, env);
  CHECK(p.config.command == std::vector<std::string>{elf, "x"});
  p = run({"--no-python", "true"}, env);  // found on PATH, exec'd by name
  CHECK(p.config.command == std::vector<std::string>{"true"});

  p = run({"--run-path", script, "x"}, env);
  REQUIRE(p.config.command.size() == 6);
  CHECK(p.config.command[0] == fake_python);
  CHECK(p.config.command[1] == "-u");
  CHECK(p.config.command[2] == "-c");
  CHECK_THAT(p.config.command[3], Contains("runpy.run_path(sys.argv[0], run_name='__main__')"));
  CHECK(p.config.command[4] == script);
  CHECK(p.config.command[5] == "x");
  // --run-path takes precedence over --no-python and -m, as in torchrun.
  CHECK(run({"--run-path", "--no-python", "-m", script}, env).config.command[2] == "-c");
}

TEST_CASE("python interpreter: PYTHON_EXEC, else python3 on PATH") {
  TempDir dir;
  std::string script = dir.file("train.py", "print('hi')\n", 0644);
  Env env = base_env();
  env["PYTHON_EXEC"] = (dir.path / "missing-python").string();
  CHECK_THAT(failure({script}, env).message, Contains("PYTHON_EXEC="));

  env = base_env();
  dir.file("python3", "#!/bin/sh\n", 0755);
  env["PATH"] = dir.path.string();
  CHECK(run({script}, env).config.command[0] == "python3");
  env["PATH"] = (dir.path / "empty").string();
  CHECK_THAT(failure({script}, env).message, Contains("'python3' not found on PATH"));
}

TEST_CASE("a native file named without a slash runs as ./name") {
  TempDir dir;
  dir.file("train", kElf, 0755);
  struct Cwd {
    fs::path old = fs::current_path();
    ~Cwd() { fs::current_path(old); }
  } restore;
  fs::current_path(dir.path);
  CHECK(run({"train", "x"}).config.command == std::vector<std::string>{"./train", "x"});
}

TEST_CASE("redirects and tee per-rank maps") {
  Parsed p = run({"-r", "0:1,2:3", "--tee=1:2", kProg});
  const auto& r = p.config.redirects;
  CHECK(r.per_rank_given);
  CHECK(r.for_rank(0) == Std::out);
  CHECK(r.for_rank(1) == Std::none);
  CHECK(r.for_rank(2) == Std::all);
  CHECK(p.config.tee.for_rank(1) == Std::err);
  CHECK(p.config.tee.for_rank(0) == Std::none);
  CHECK(run({"-r=3", kProg}).config.redirects.for_rank(7) == Std::all);
}

TEST_CASE("standalone: a fresh uuid on every parse, the port left to the agent") {
  static const std::regex uuid4(
      "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  // Explicit rendezvous options are ignored, as in torchrun.
  Parsed a = run({"--standalone", "--rdzv-id=x", "--rdzv-backend=etcd", kProg});
  CHECK(std::regex_match(a.config.run_id, uuid4));
  CHECK(a.config.master_addr == "127.0.0.1");
  // rendezvous/worker_store.h settles it when the agent starts
  // (test_worker_store.cc).
  CHECK(a.config.master_port == 0);

  Parsed b = run({"--standalone", kProg});
  CHECK(std::regex_match(b.config.run_id, uuid4));
  CHECK(b.config.run_id != a.config.run_id);
}

TEST_CASE("static backend, one node: the port and what named it go to the agent") {
  // The agent's bind is the check, with this name in its line
  // (test_torch_main_flags.py): a look here could not see a job that starts
  // in the same instant.
  Listener held;
  std::string port = std::to_string(held.port);
  Parsed given = run({"--master-port=" + port, kProg});
  CHECK(given.config.master_port == held.port);
  CHECK(given.config.master_port_origin == "--master-port=" + port);
  // An explicit static endpoint replaces --master-addr/--master-port.
  Parsed endpoint = run({"--rdzv-endpoint=127.0.0.1:" + port, kProg});
  CHECK(endpoint.config.master_port_origin == "--rdzv-endpoint=127.0.0.1:" + port);
  Parsed p = run({"--rdzv-endpoint=localhost:" +
                      std::to_string(cxxrun::net::pick_free_port("127.0.0.1")),
                  kProg});
  CHECK(p.config.master_addr == "localhost");
  CHECK_THAT(failure({"--rdzv-endpoint=localhost", kProg}).message, Contains("port is missing"));
  // IPv6 master address loses its brackets.
  CHECK(run({"--master-addr=[::1]", kProg}).config.master_addr == "::1");
}

TEST_CASE("torch's event log handlers: console, null and dynamic_rendezvous") {
  CHECK_FALSE(run({kProg}).config.event_log_console);
  CHECK(run({"--event-log-handler=console", kProg}).config.event_log_console);
  CHECK(run({"--event_log_handler", "console", kProg}).config.event_log_console);
  CHECK(run({kProg}, with("PET_EVENT_LOG_HANDLER", "console")).config.event_log_console);
  // torch's dynamic_rendezvous handler is a NullHandler.
  CHECK_FALSE(run({"--event-log-handler=dynamic_rendezvous", kProg}).config.event_log_console);
  Failure f = failure({"--event-log-handler=file", kProg});
  CHECK_FALSE(f.not_built_yet);
  CHECK_THAT(f.message, Contains("--event-log-handler=file") && Contains("null") && Contains("console") &&
                            Contains("dynamic_rendezvous"));
}

TEST_CASE("a Python plugin is refused with what to use instead") {
  Failure f = failure({"--logs-specs=mine", kProg});
  CHECK_FALSE(f.not_built_yet);
  CHECK_THAT(f.message, Contains("--logs-specs=mine: cxxrun runs no Python plugins") && Contains("--log-dir") &&
                            Contains("--tee") && Contains("TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"));
  // Multi-node runs now.
  CHECK_FALSE(failure({"--nnodes=2", "--node-rank=2", kProg}).not_built_yet);
  CHECK_NOTHROW(run({"--nnodes=2", "--node-rank=1", "--master-addr=10.9.8.7", kProg}));
  CHECK_NOTHROW(run({"--rdzv-backend=c10d", "--rdzv-endpoint=node-17.cluster:29400", kProg}));
}

TEST_CASE("worker environment extras: OMP_NUM_THREADS, NCCL, signals") {
  Parsed p = run({"--nproc-per-node=2", kProg});
  CHECK(p.config.extra_env.at("OMP_NUM_THREADS") == "1");
  REQUIRE(p.warnings.size() == 1);
  CHECK_THAT(p.warnings[0],
             Contains("Setting OMP_NUM_THREADS environment variable for each process to be 1"));
  CHECK_THAT(p.warnings[0], Contains("as needed. \n*****"));

  Env env = base_env();
  env["OMP_NUM_THREADS"] = "8";
  env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "0";
  env["TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"] = "[${rank}]";
  p = run({"--nproc-per-node=2", "--signals-to-handle=SIGUSR1, usr2,TERM,SIGUSR1", kProg}, env);
  CHECK(p.config.extra_env.count("OMP_NUM_THREADS") == 0);
  CHECK(p.warnings.empty());
  CHECK(p.config.extra_env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "0");
  CHECK(p.config.log_line_prefix_template == "[${rank}]");
  CHECK(p.config.signals_to_handle == std::vector<int>{SIGUSR1, SIGUSR2, SIGTERM});
  CHECK(p.config.extra_env.at("TORCHELASTIC_SIGNALS_TO_HANDLE") == "SIGUSR1, usr2,TERM,SIGUSR1");
}

TEST_CASE("shutdown timeout: flag beats TORCH_ELASTIC_SHUTDOWN_TIMEOUT beats 30 s") {
  Env env = base_env();
  env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] = "7";
  CHECK(run({kProg}, env).config.shutdown_timeout == std::chrono::seconds(7));
  CHECK(run({"--shutdown-timeout=2.5", kProg}, env).config.shutdown_timeout ==
        std::chrono::milliseconds(2500));
  // torch's action=env: PET_SHUTDOWN_TIMEOUT stands for the flag.
  env["PET_SHUTDOWN_TIMEOUT"] = "4";
  CHECK(run({kProg}, env).config.shutdown_timeout == std::chrono::seconds(4));
  CHECK(run({"--shutdown_timeout", "3", kProg}, env).config.shutdown_timeout == std::chrono::seconds(3));
  // 0: SIGKILL at once.
  CHECK(run({"--shutdown-timeout=0", kProg}, env).config.shutdown_timeout == std::chrono::milliseconds(0));
  CHECK(run({kProg}, with("PET_SHUTDOWN_TIMEOUT", "0")).config.shutdown_timeout == std::chrono::milliseconds(0));
  CHECK(run({"--shutdown-timeout=0.0001", kProg}, env).config.shutdown_timeout == std::chrono::milliseconds(1));
  CHECK_THAT(failure({kProg}, with("PET_SHUTDOWN_TIMEOUT", "soon")).message, Contains("PET_SHUTDOWN_TIMEOUT=soon"));
}

TEST_CASE("signals the user lists end the job; what cxxrun adds only reaches the workers") {
  CHECK(run({"--signals-to-handle=SIGTERM,SIGUSR1", kProg}).config.forward_only_signals.empty());
  CHECK(run({kProg}).config.forward_only_signals.empty());
}

TEST_CASE("virtual local rank: one device per worker, through the agent's CUDA_VISIBLE_DEVICES") {
  CHECK(run({"--nproc-per-node=3", kProg}).config.visible_devices.empty());
  CHECK(run({"--nproc-per-node=3", "--virtual-local-rank", kProg}).config.visible_devices ==
        std::vector<std::string>{"0", "1", "2"});
  Env env = with("CUDA_VISIBLE_DEVICES", "4, 6,GPU-abc,7");
  CHECK(run({"--nproc-per-node=3", "--virtual_local_rank", kProg}, env).config.visible_devices ==
        std::vector<std::string>{"4", "6", "GPU-abc"});
  env["PET_VIRTUAL_LOCAL_RANK"] = "1";
  CHECK(run({"--nproc-per-node=2", kProg}, env).config.visible_devices == std::vector<std::string>{"4", "6"});
  env["PET_VIRTUAL_LOCAL_RANK"] = "0";
  CHECK(run({"--nproc-per-node=2", kProg}, env).config.visible_devices.empty());
  CHECK(failure({"--nproc-per-node=5", "--virtual-local-rank", kProg}, with("CUDA_VISIBLE_DEVICES", "0,1")).message ==
        "--virtual-local-rank: 5 workers (--nproc-per-node=5) but CUDA_VISIBLE_DEVICES=0,1 lists 2 devices; each "
        "worker needs one of its own");
  CHECK_THAT(failure({"--nproc-per-node=1", "--virtual-local-rank", kProg}, with("CUDA_VISIBLE_DEVICES", "")).message,
             Contains("CUDA_VISIBLE_DEVICES= lists 0 devices"));
  CHECK_THAT(failure({"--virtual-local-rank=1", kProg}).message, Contains("is a flag and takes no value"));
}

TEST_CASE("duplicate filters: torch's comma list, ',,' a literal comma") {
  auto filters = [](const std::string& text) {
    return run({"--tee=3", "--duplicate-stdout-filters=" + text, kProg}).config.duplicate_stdout_filters;
  };
  CHECK(run({kProg}).config.duplicate_stdout_filters.empty());
  CHECK(filters("loss") == std::vector<std::string>{"loss"});
  CHECK(filters("apple,orange") == std::vector<std::string>{"apple", "orange"});
  CHECK(filters("a,,b,c") == std::vector<std::string>{"a,b", "c"});
  CHECK(filters("x,") == std::vector<std::string>{"x", ""});
  CHECK(run({"--tee=2", "--duplicate_stderr_filters", "ERR,WARN", kProg}).config.duplicate_stderr_filters ==
        std::vector<std::string>{"ERR", "WARN"});
  CHECK(run({"--tee=3", kProg}, with("PET_DUPLICATE_STDOUT_FILTERS", "q")).config.duplicate_stdout_filters ==
        std::vector<std::string>{"q"});
  // Only tee'd streams are copied: said once, not refused.
  Parsed p = run({"--duplicate-stdout-filters=loss", kProg});
  REQUIRE(p.warnings.size() == 1);
  CHECK_THAT(p.warnings[0], Contains("--duplicate-stdout-filters=loss copies nothing: only the streams given to --tee"));
  CHECK(run({"--tee=0:1", "--duplicate-stdout-filters=loss", kProg}).warnings.empty());
  CHECK_THAT(run({"--tee=1", "--duplicate-stderr-filters=x", kProg}).warnings.at(0),
             Contains("--duplicate-stderr-filters=x copies nothing"));
}

TEST_CASE("nproc-per-node device names") {
  std::vector<std::string> notes;
  RawValue gpu{"gpu", "--nproc-per-node"};
  CHECK(resolve_nproc(gpu, {8, 4}, notes) == 4);
  CHECK_THROWS_WITH(resolve_nproc(gpu, {8, 0}, notes),
                    "--nproc-per-node=gpu: CUDA is not available");
  RawValue autov{"auto", "PET_NPROC_PER_NODE"};
  CHECK(resolve_nproc(autov, {8, 0}, notes) == 8);
  CHECK(resolve_nproc(autov, {8, 2}, notes) == 2);
  CHECK(resolve_nproc({"cpu", "--nproc-per-node"}, {6, 2}, notes) == 6);
  CHECK(resolve_nproc({" 3 ", "--nproc-per-node"}, {6, 2}, notes) == 3);
  CHECK(notes.size() == 4);

  CHECK(run({"--nproc-per-node=cpu", kProg}).config.nproc_per_node == cpu_count());
  if (nvidia_gpu_count(base_env()) == 0)
    CHECK_THAT(failure({"--nproc-per-node=gpu", kProg}).message, Contains("CUDA is not available"));
}

TEST_CASE("GPU count from the driver's directory and CUDA_VISIBLE_DEVICES") {
  TempDir dir;
  for (const char* bus : {"0000:01:00.0", "0000:02:00.0", "0000:03:00.0", "0000:04:00.0"})
    fs::create_directory(dir.path / bus);
  Env env;
  CHECK(nvidia_gpu_count(env, dir.path.string()) == 4);
  CHECK(nvidia_gpu_count(env, (dir.path / "absent").string()) == 0);
  env["CUDA_VISIBLE_DEVICES"] = "1,3";
  CHECK(nvidia_gpu_count(env, dir.path.string()) == 2);
  CHECK(visible_gpu_count("", 4) == 0);
  CHECK(visible_gpu_count("-1", 4) == 0);
  CHECK(visible_gpu_count("0,7,1", 4) == 1);  // stops at the first invalid index
  CHECK(visible_gpu_count("1,1", 4) == 1);
  CHECK(visible_gpu_count("GPU-8f3e,MIG-1", 4) == 2);
  CHECK(visible_gpu_count("0,1,2,3,0", 4) == 4);
  CHECK(visible_gpu_count("0", 0) == 0);
}

TEST_CASE("help and version") {
  Parsed p = run({"--help"});
  CHECK(p.help);
  CHECK(run({"-h", "--nnodes=bad"}).help);
  CHECK(run({"--version"}).version);
  // The commit the binary was built from: a hex id (-dirty with uncommitted
  // changes), or "unknown" outside a git checkout.
  CHECK_THAT(version_text(), Catch::Matches(R"(cxxrun 0\.1\.0 \(commit ([0-9a-f]{7,40}(-dirty)?|unknown)\))"));

  std::string help = help_text();
  CHECK(help.starts_with("usage: cxxrun [-h] [--nnodes NNODES] [--nproc-per-node NPROC_PER_NODE]"));
  CHECK_THAT(help, Contains("training_script ..."));
  CHECK_THAT(help, Contains("--nproc-per-node NPROC_PER_NODE, --nproc_per_node NPROC_PER_NODE"));
  CHECK_THAT(help, Contains("-r REDIRECTS, --redirects REDIRECTS"));
  CHECK_THAT(help, Contains("--start-method {spawn,fork,forkserver}"));
  CHECK_THAT(help, Contains("--no-python, --no_python"));
  CHECK_THAT(help, Contains("--signals-to-handle"));
}

TEST_CASE("start method: forkserver warms Python workers only, with the preload list") {
  TempDir dir;
  Env env = base_env();
  std::string fake_python = dir.file("python", "#!/bin/sh\n", 0755);
  env["PYTHON_EXEC"] = fake_python;
  std::string script = dir.file("train.py", "print('hi')\n", 0644);

  // No start method: warm restarts, learned from the first attempt.
  cxxrun::agent::ForkserverOptions learned = run({script}, env).config.forkserver;
  CHECK(learned.python == fake_python);
  CHECK(learned.learn);
  CHECK_FALSE(learned.preload_given);
  CHECK(learned.script == script);  // read for its top-level imports
  CHECK(run({"--run-path", script}, env).config.forkserver.script == script);
  CHECK(run({"-m", "pkg.train"}, env).config.forkserver.script.empty());
  // An explicit one is obeyed: spawn and fork start every worker by exec.
  CHECK(run({"--start-method=spawn", script}, env).config.forkserver.python.empty());
  CHECK(run({"--start-method=fork", script}, env).config.forkserver.python.empty());
  Env spawn = env;
  spawn["PET_START_METHOD"] = "spawn";
  CHECK(run({script}, spawn).config.forkserver.python.empty());

  cxxrun::agent::ForkserverOptions f = run({"--start-method=forkserver", script}, env).config.forkserver;
  CHECK(f.python == fake_python);
  CHECK_FALSE(f.learn);
  CHECK(f.preload == std::vector<std::string>{"torch", "torch.distributed"});
  CHECK_FALSE(f.preload_given);
  for (auto mode : {std::vector<std::string>{"-m", "pkg.train"}, std::vector<std::string>{"--run-path", script}}) {
    std::vector<std::string> argv{"--start-method", "forkserver"};
    argv.insert(argv.end(), mode.begin(), mode.end());
    CHECK(run(argv, env).config.forkserver.python == fake_python);
  }
  Env pet = env;
  pet["PET_START_METHOD"] = "forkserver";
  pet["PET_PRELOAD"] = " numpy , my.pkg ";
  f = run({script}, pet).config.forkserver;
  CHECK(f.preload == std::vector<std::string>{"numpy", "my.pkg"});
  CHECK(f.preload_given);
  CHECK(run({"--start-method=forkserver", "--preload=", script}, env).config.forkserver.preload.empty());

  // A native program starts by exec, and says so.
  std::string elf = dir.file("train", kElf, 0755);
  Parsed native = run({"--start-method=forkserver", elf}, env);
  CHECK(native.config.forkserver.python.empty());
  CHECK_THAT(native.warnings.at(0), Contains("is not a Python program, so its workers start by exec"));
  CHECK_THAT(run({"--start-method=spawn", "--preload=json", script}, env).warnings.at(0),
             Contains("has no effect without"));
  // The default start method takes --preload as what to preload once the workers run.
  f = run({"--preload=json", script}, env).config.forkserver;
  CHECK(f.learn);
  CHECK(f.preload == std::vector<std::string>{"json"});
  CHECK(run({"--preload=json", elf}, env).warnings.at(0) == "--preload=json has no effect: " + elf +
                                                                " is not a Python program");
  CHECK(run({elf}, env).warnings.empty());  // a native program by default: no word

  CHECK_THAT(failure({"--start-method=forkserver", "--preload=1bad", script}, env).message,
             Contains("--preload=1bad: '1bad' is not a module name"));
  CHECK_THAT(failure({"--start-method=forkserver", "--preload=torch,,x", script}, env).message,
             Contains("'' is not a module name"));
  CHECK_THAT(failure({"--preload=a-b", script}, env).message, Contains("'a-b' is not a module name"));
}

TEST_CASE("python workers get faulthandler unless the user chose otherwise") {
  // A segfault then shows the Python stack in the summary's tail, not only
  // a signal and a pid.
  TempDir dir;
  Env env = base_env();
  env["PYTHON_EXEC"] = dir.file("python", "#!/bin/sh\n", 0755);
  const std::string script = dir.file("train.py", "print(1)\n", 0644);
  CHECK(run({script}, env).config.extra_env.at("PYTHONFAULTHANDLER") == "1");
  CHECK(run({"-m", "train"}, env).config.extra_env.at("PYTHONFAULTHANDLER") == "1");
  // Native programs are not Python's; the user's own setting, even empty
  // (off), stays as it is.
  CHECK(run({kProg}, env).config.extra_env.count("PYTHONFAULTHANDLER") == 0);
  env["PYTHONFAULTHANDLER"] = "";
  CHECK(run({script}, env).config.extra_env.count("PYTHONFAULTHANDLER") == 0);
}
