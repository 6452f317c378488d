#include "options_fixture.h"

TEST_CASE("defaults match torchrun's") {
  Env env = base_env();
  Parsed p = run({kProg}, env);
  const auto& c = p.config;
  CHECK_FALSE(p.help);
  CHECK(c.command == std::vector<std::string>{kProg});
  CHECK(c.entrypoint_name == kProg);
  CHECK(c.nproc_per_node == 1);
  CHECK(c.max_restarts == 0);
  CHECK(c.run_id == "none");
  CHECK(c.role == "default");
  CHECK(c.group_rank == 0);
  CHECK(c.group_world_size == 1);
  CHECK(c.master_addr == "127.0.0.1");
  CHECK(c.master_port == std::stoi(env.at("PET_MASTER_PORT")));
  CHECK(c.use_agent_store);  // the agent serves the workers' store, as torch >= 2.4
  CHECK(c.log_dir.empty());
  CHECK(c.redirects.for_rank(0) == Std::none);
  CHECK(c.tee.for_rank(0) == Std::none);
  CHECK(c.local_ranks_filter.empty());
  CHECK(c.log_line_prefix_template.empty());
  CHECK(c.signals_to_handle == std::vector<int>{SIGTERM, SIGINT, SIGHUP, SIGQUIT});
  CHECK(c.shutdown_timeout == std::chrono::seconds(30));
  CHECK(c.extra_env.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "1");
  CHECK(c.extra_env.at("TORCHELASTIC_SIGNALS_TO_HANDLE") == "SIGTERM,SIGINT,SIGHUP,SIGQUIT");
  CHECK(c.extra_env.count("OMP_NUM_THREADS") == 0);
  CHECK(p.warnings.empty());
}

TEST_CASE("one node with no port: a free port and a fresh run id, as torch main") {
  Env env = base_env();
  env.erase("PET_MASTER_PORT");
  for (auto args : {std::vector<std::string>{kProg}, {"--nproc-per-node=4", kProg}, {"--rdzv-backend=static", kProg},
                    {"--nnodes=1", "--master-addr=127.0.0.1", kProg}}) {
    Parsed p = run(args, env);
    CHECK(p.config.rdzv.backend == cxxrun::rendezvous::Backend::local);
    CHECK(p.config.master_port == 0);  // the agent's store binds a free one
    CHECK(p.config.use_agent_store);
    CHECK(p.config.master_port_origin.empty());
    CHECK(std::regex_match(p.config.run_id, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")));
  }
  CHECK(run({kProg}, env).config.run_id != run({kProg}, env).config.run_id);
  // A run id the user gave stays (torch replaces it: docs/torchrun-compat.md).
  CHECK(run({"--rdzv-id=mine", kProg}, env).config.run_id == "mine");
  // Any port given keeps the static backend on it.
  const std::string port = std::to_string(cxxrun::net::pick_free_port("127.0.0.1"));
  Parsed given = run({"--master-port=" + port, kProg}, env);
  CHECK(given.config.master_port == std::stoi(port));
  CHECK(given.config.run_id == "none");
  CHECK(given.config.master_port_origin == "--master-port=" + port);
  CHECK(run({kProg}, with("PET_MASTER_PORT", port)).config.master_port_origin == "PET_MASTER_PORT=" + port);
  CHECK(run({"--rdzv-endpoint=127.0.0.1:" + port, kProg}, env).config.master_port == std::stoi(port));
  // Two nodes: 29500, as before.
  CHECK(run({"--nnodes=2", "--node-rank=1", "--master-addr=10.9.8.7", kProg}, env).config.master_port == 29500);
}

TEST_CASE("local addr: a one-node job's MASTER_ADDR") {
  CHECK(run({"--standalone", "--local-addr=127.0.0.2", kProg}).config.master_addr == "127.0.0.2");
  Env env = base_env();
  env.erase("PET_MASTER_PORT");
  CHECK(run({"--local-addr=localhost", kProg}, env).config.master_addr == "localhost");
  CHECK(run({"--standalone", kProg}).config.master_addr == "127.0.0.1");
  CHECK_THAT(failure({"--standalone", "--local-addr=198.51.100.9", kProg}).message,
             Contains("--local-addr=198.51.100.9: not an address of this machine"));
}

TEST_CASE("dashed and underscored spellings mean the same") {
  auto same = [](std::vector<std::string> a, std::vector<std::string> b) {
    a.push_back(kProg);
    b.push_back(kProg);
    return std::pair{run(a).config, run(b).config};
  };
  auto [a, b] = same({"--nproc-per-node=3"}, {"--nproc_per_node", "3"});
  CHECK(a.nproc_per_node == 3);
  CHECK(b.nproc_per_node == 3);
  std::tie(a, b) = same({"--max-restarts=2"}, {"--max_restarts=2"});
  CHECK((a.max_restarts == 2 && b.max_restarts == 2));
  std::tie(a, b) = same({"--rdzv-id=j"}, {"--rdzv_id=j"});
  CHECK((a.run_id == "j" && b.run_id == "j"));
  TempDir logs;  // the launcher creates the log directory
  const std::string x = (logs.path / "x").string();
  std::tie(a, b) = same({"--log-dir=" + x}, {"--log_dir", x});
  CHECK((a.log_dir == x && b.log_dir == x));
  std::tie(a, b) = same({"--nproc-per-node=3", "--local-ranks-filter=0,2"},
                        {"--nproc-per-node=3", "--local_ranks_filter=0,2"});
  CHECK((a.local_ranks_filter == std::set<int>{0, 2} &&
         b.local_ranks_filter == a.local_ranks_filter));
  std::tie(a, b) = same({"--signals-to-handle=SIGUSR1"}, {"--signals_to_handle=SIGUSR1"});
  CHECK((a.signals_to_handle == std::vector<int>{SIGUSR1} &&
         b.signals_to_handle == a.signals_to_handle));
  std::tie(a, b) = same({"-r", "3"}, {"--redirects=3"});
  CHECK((a.redirects.all == Std::all && b.redirects.all == Std::all));
  std::tie(a, b) = same({"-t=2"}, {"--tee", "2"});
  CHECK((a.tee.all == Std::err && b.tee.all == Std::err));
  std::tie(a, b) = same({"--shutdown-timeout=2"}, {"--shutdown_timeout=2"});
  CHECK(
      (a.shutdown_timeout == std::chrono::seconds(2) && b.shutdown_timeout == a.shutdown_timeout));
  std::tie(a, b) = same({"--master-addr=localhost"}, {"--master_addr=localhost"});
  CHECK((a.master_addr == "localhost" && b.master_addr == "localhost"));
  std::tie(a, b) = same({"--no-python"}, {"--no_python"});
  CHECK((a.command == b.command));
  // The last of a repeated option wins, as with argparse.
  CHECK(run({"--nproc-per-node=2", "--nproc_per_node=5", kProg}).config.nproc_per_node == 5);
}

TEST_CASE("PET_ variables: command line beats environment beats default") {
  Env env = base_env();
  env["PET_NPROC_PER_NODE"] = "3";
  env["PET_MAX_RESTARTS"] = "4";
  env["PET_ROLE"] = "trainer";
  env["PET_RDZV_ID"] = "from-env";
  TempDir logs;  // the launcher creates the log directory
  const std::string env_logs = (logs.path / "env-logs").string();
  env["PET_LOG_DIR"] = env_logs;
  env["PET_REDIRECTS"] = "1";
  Parsed p = run({kProg}, env);
  CHECK(p.config.nproc_per_node == 3);
  CHECK(p.config.max_restarts == 4);
  CHECK(p.config.role == "trainer");
  CHECK(p.config.run_id == "from-env");
  CHECK(p.config.log_dir == env_logs);
  CHECK(p.config.redirects.all == Std::out);

  p = run({"--nproc-per-node=2", "--max_restarts=0", "--role=r", "--rdzv-id=cli", kProg}, env);
  CHECK(p.config.nproc_per_node == 2);
  CHECK(p.config.max_restarts == 0);
  CHECK(p.config.role == "r");
  CHECK(p.config.run_id == "cli");

  // A bad value from the environment is named by its variable.
  env["PET_NNODES"] = "2:1";
  CHECK_THAT(failure({kProg}, env).message, Contains("PET_NNODES=2:1"));
}

TEST_CASE("PET_ flags read 0, 1 or empty only") {
  Env env = base_env();
  env["PET_STANDALONE"] = "1";
  Parsed p = run({kProg}, env);
  CHECK(p.config.run_id != "none");  // a fresh uuid
  env["PET_STANDALONE"] = "0";
  CHECK(run({kProg}, env).config.run_id == "none");

  env["PET_STANDALONE"] = "true";
  Failure f = failure({kProg}, env);
  CHECK_THAT(f.message, Contains("PET_STANDALONE=true"));
  CHECK_THAT(f.message, Contains("0 (off), 1 or empty (on)"));
  // Even the flag on the command line does not excuse a malformed variable.
  CHECK_THAT(failure({"--standalone", kProg}, env).message, Contains("PET_STANDALONE=true"));

  env = base_env();
  env["PET_MODULE"] = "1";
  CHECK(run({"pkg.mod"}, env).config.command[2] == "-m");
  env = base_env();
  env["PET_NO_PYTHON"] = "yes";
  CHECK_THAT(failure({kProg}, env).message, Contains("PET_NO_PYTHON=yes"));
}

TEST_CASE("no PET_ fallback for --logs-specs and --numa-binding") {
  Env env = base_env();
  env["PET_LOGS_SPECS"] = "custom";
  env["PET_NUMA_BINDING"] = "node";
  CHECK_NOTHROW(run({kProg}, env));
}

TEST_CASE("everything after the program reaches it untouched") {
  Parsed p = run(
      {"--nproc-per-node=2", kProg, "--nproc-per-node", "3", "-m", "--foo", "-h", "--", "-r", "7"});
  CHECK(p.config.nproc_per_node == 2);
  CHECK_FALSE(p.help);
  CHECK(p.config.command == std::vector<std::string>{kProg, "--nproc-per-node", "3", "-m", "--foo",
                                                     "-h", "--", "-r", "7"});
  // "--" ends cxxrun's options.
  p = run({"--max-restarts=1", "--", kProg, "--max-restarts=2"});
  CHECK(p.config.max_restarts == 1);
  CHECK(p.config.command == std::vector<std::string>{kProg, "--max-restarts=2"});
}

TEST_CASE("unknown options before the program are errors, not the program") {
  CHECK(failure({"--foo", kProg}).message == "unrecognized option --foo");
  // A prefix of no option (a prefix of one is that option: test_options_abbreviations.cc).
  CHECK_THAT(failure({"--nprocs", "2", kProg}).message, Contains("unrecognized option --nprocs"));
  CHECK_THAT(failure({"--nnodes"}).message, Contains("--nnodes"));
  CHECK(failure({"--standalone=1", kProg}).message == "--standalone is a flag and takes no value");
  CHECK(failure({"--no_python=0", kProg}).message == "--no_python is a flag and takes no value");
}

TEST_CASE("bad values are refused, naming the value") {
  auto message = [](std::vector<std::string> args) {
    args.push_back(kProg);
    return failure(args).message;
  };
  CHECK_THAT(message({"--nproc-per-node=0"}), Contains("--nproc-per-node=0"));
  CHECK_THAT(message({"--nproc-per-node=abc"}), Contains("--nproc-per-node=abc"));
  CHECK_THAT(message({"--nproc-per-node=-2"}), Contains("positive integer"));
  CHECK_THAT(message({"--nproc-per-node=xpu"}), Contains("not supported"));
  CHECK_THAT(message({"--nnodes=2:1"}), Contains("--nnodes=2:1"));
  CHECK_THAT(message({"--nnodes=2:1"}), Contains("0 < MIN <= MAX"));
  CHECK_THAT(message({"--nnodes=0"}), Contains("--nnodes=0"));
  CHECK_THAT(message({"--nnodes=1:2:3"}), Contains("MIN:MAX"));
  CHECK_THAT(message({"--nnodes=a"}), Contains("--nnodes=a"));
  CHECK_THAT(message({"--redirects=7"}), Contains("--redirects=7"));
  CHECK_THAT(message({"--redirects=7"}), Contains(R"(<^[0123]$> or <^(\d:[0123],)*(\d:[0123])$>)"));
  CHECK_THAT(message({"-t", "0:4"}), Contains("--tee=0:4"));
  CHECK_THAT(message({"-r", "10:1"}), Contains("--redirects=10:1"));
  CHECK_THAT(message({"-r", "0:1,"}), Contains("--redirects=0:1,"));
  CHECK_THAT(message({"--max-restarts=-1"}), Contains("--max-restarts=-1"));
  CHECK_THAT(message({"--max-restarts=1.5"}), Contains("--max-restarts=1.5"));
  CHECK_THAT(message({"--monitor-interval=0"}), Contains("--monitor-interval=0"));
  CHECK_THAT(message({"--monitor-interval=-1"}), Contains("> 0"));
  CHECK_THAT(message({"--monitor-interval=soon"}), Contains("--monitor-interval=soon"));
  CHECK_THAT(message({"--start-method=thread"}), Contains("--start-method=thread"));
  CHECK_THAT(message({"--local-ranks-filter=a,b"}),
             Contains("--local_ranks_filter must be a comma-separated list of integers e.g. "
                      "--local_ranks_filter=0,1,2"));
  CHECK_THAT(message({"--local-ranks-filter=0,,1"}), Contains("--local-ranks-filter=0,,1"));
  CHECK_THAT(message({"--rdzv-conf=a=1,=2"}), Contains("--rdzv-conf=a=1,=2"));
  CHECK_THAT(message({"--rdzv-conf=timeout="}), Contains("'timeout' must have a value"));
  CHECK_THAT(message({"--rdzv-conf=timeout"}), Contains("'timeout' must have a value"));
  CHECK_THAT(message({"--rdzv-conf=timeout=0"}), Contains("--rdzv-conf timeout=0"));
  CHECK_THAT(message({"--rdzv-conf=colour=blue"}), Contains("unknown key"));
  CHECK_THAT(message({"--signals-to-handle=SIGTERM,SIGFOO"}), Contains("SIGFOO"));
  CHECK_THAT(message({"--signals-to-handle=SIGKILL"}), Contains("SIGKILL cannot be caught"));
  CHECK_THAT(message({"--signals-to-handle=STOP"}), Contains("STOP cannot be caught"));
  CHECK_THAT(message({"--master-port=0"}), Contains("--master-port=0"));
  CHECK_THAT(message({"--master-port=70000"}), Contains("1..65535"));
  CHECK_THAT(message({"--master-port=http"}), Contains("--master-port=http"));
  CHECK_THAT(message({"--node-rank=1"}), Contains("--node-rank=1"));
  CHECK_THAT(message({"--shutdown-timeout=-1"}), Contains("--shutdown-timeout=-1: must be a number of seconds >= 0"));
  CHECK_THAT(message({"--shutdown-timeout=x"}), Contains("--shutdown-timeout=x"));
  CHECK_THAT(message({"--rdzv-backend=zookeeper"}), Contains("--rdzv-backend=zookeeper"));
  CHECK_THAT(message({"--numa-binding=nodes"}), Contains("invalid choice"));
  CHECK_FALSE(failure({"--numa-binding=nodes", kProg}).not_built_yet);

  Env env = base_env();
  env["TORCH_ELASTIC_SHUTDOWN_TIMEOUT"] = "-5";
  CHECK_THAT(failure({kProg}, env).message, Contains("TORCH_ELASTIC_SHUTDOWN_TIMEOUT=-5"));
}

TEST_CASE("module mode with --no-python is torchrun's error") {
  CHECK(failure({"-m", "--no-python", "pkg.mod"}).message ==
        "Don't use both the '--no-python' flag and the '--module' flag at the same time.");
}
