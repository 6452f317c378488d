// cxxrun's own options: --event-log, --health-port/--health-host,
// --heartbeat-timeout, --section-timeout, --stack-dump-signal, --inject-fault,
// and the torch variables that go with them.
#include "options_fixture.h"

using std::chrono::milliseconds;
using FaultKind = cxxrun::agent::FaultSpec::Kind;

namespace {

cxxrun::agent::Config config_of(std::vector<std::string> args, const Env& env = base_env()) {
  args.push_back(kProg);
  return run(args, env).config;
}

}  // namespace

TEST_CASE("extensions are off by default") {
  auto c = config_of({});
  CHECK(c.event_log.empty());
  CHECK(c.health_port == -1);
  CHECK(c.health_host == "127.0.0.1");  // where the server would listen once a port is given
  CHECK(c.heartbeat_timeout == milliseconds(0));
  CHECK(c.section_timeouts.empty());
  CHECK(c.stack_dump_signal == 0);
  CHECK_FALSE(c.file_timer);
  CHECK(c.file_timer_path.empty());
  CHECK(c.faults.empty());
}

TEST_CASE("event log: a file in an existing directory") {
  TempDir dir;
  std::string file = (dir.path / "events.jsonl").string();
  CHECK(config_of({"--event-log=" + file}).event_log == file);
  CHECK(config_of({"--event_log", file}).event_log == file);
  CHECK(config_of({}, with("PET_EVENT_LOG", file)).event_log == file);
  CHECK(config_of({"--event-log=events.jsonl"}).event_log == "events.jsonl");  // in the cwd

  CHECK_THAT(refusal({"--event-log="}), Contains("--event-log=: needs a file name"));
  std::string missing = (dir.path / "nope" / "events.jsonl").string();
  CHECK_THAT(refusal({"--event-log=" + missing}),
             Contains("--event-log=" + missing + ": directory " + (dir.path / "nope").string() +
                      " does not exist"));
  CHECK_THAT(refusal({"--event-log=" + dir.path.string()}), Contains("is a directory"));
  CHECK_THAT(refusal({}, with("PET_EVENT_LOG", missing)), Contains("PET_EVENT_LOG=" + missing));
}

TEST_CASE("health port and host") {
  CHECK(config_of({"--health-port=8080"}).health_port == 8080);
  CHECK(config_of({"--health_port", "0"}).health_port == 0);
  CHECK(config_of({"--health-port=65535"}).health_port == 65535);
  CHECK(config_of({}, with("PET_HEALTH_PORT", "9000")).health_port == 9000);
  CHECK(config_of({}, with("TORCHELASTIC_HEALTH_CHECK_PORT", "9001")).health_port == 9001);
  // The flag beats PET_, and PET_ beats torch's own variable.
  Env both = with("TORCHELASTIC_HEALTH_CHECK_PORT", "9001");
  both["PET_HEALTH_PORT"] = "9000";
  CHECK(config_of({}, both).health_port == 9000);
  CHECK(config_of({"--health-port=9002"}, both).health_port == 9002);

  for (std::string bad : {"-1", "65536", "http", "", "80.5"})
    CHECK_THAT(refusal({"--health-port=" + bad}),
               Contains("--health-port=" + bad + ": must be a port number in 0..65535"));
  CHECK_THAT(refusal({}, with("TORCHELASTIC_HEALTH_CHECK_PORT", "x")),
             Contains("TORCHELASTIC_HEALTH_CHECK_PORT=x: must be a port number"));

  CHECK(config_of({"--health-port=0", "--health-host=127.0.0.1"}).health_host == "127.0.0.1");
  CHECK(config_of({"--health-port=0", "--health_host", "::1"}).health_host == "::1");
  CHECK(config_of({"--health-port=0", "--health-host=[::1]"}).health_host == "::1");
  CHECK(config_of({"--health-port=0", "--health-host=localhost"}).health_host == "localhost");
  CHECK(config_of({"--health-port=0", "--health-host="}).health_host.empty());
  CHECK_THAT(refusal({"--health-port=0", "--health-host=example.com"}),
             Contains("--health-host=example.com: must be an IP address or localhost"));
  Parsed lonely = run({"--health-host=127.0.0.1", kProg});
  REQUIRE(lonely.warnings.size() == 1);
  CHECK_THAT(lonely.warnings[0], Contains("--health-host=127.0.0.1 has no effect"));
}

TEST_CASE("heartbeat timeout") {
  CHECK(config_of({"--heartbeat-timeout=30"}).heartbeat_timeout == milliseconds(30000));
  CHECK(config_of({"--heartbeat_timeout", "0.25"}).heartbeat_timeout == milliseconds(250));
  CHECK(config_of({"--heartbeat-timeout=0.0001"}).heartbeat_timeout == milliseconds(1));
  CHECK(config_of({"--heartbeat-timeout=0"}).heartbeat_timeout == milliseconds(0));
  CHECK(config_of({}, with("PET_HEARTBEAT_TIMEOUT", "2")).heartbeat_timeout == milliseconds(2000));
  for (std::string bad : {"-1", "soon", "nan", "inf", "", "1e10"})
    CHECK_THAT(refusal({"--heartbeat-timeout=" + bad}),
               Contains("--heartbeat-timeout=" + bad + ": must be a number of seconds > 0"));
}

TEST_CASE("hang timeout: no worker's progress for this long is a hang") {
  CHECK(config_of({}).hang_timeout == milliseconds(0));
  CHECK(config_of({"--hang-timeout=10"}).hang_timeout == milliseconds(10000));
  CHECK(config_of({"--hang_timeout", "0.5"}).hang_timeout == milliseconds(500));
  CHECK(config_of({}, with("PET_HANG_TIMEOUT", "60")).hang_timeout == milliseconds(60000));
  for (std::string bad : {"-1", "soon", "nan", "", "1e10"})
    CHECK_THAT(refusal({"--hang-timeout=" + bad}), Contains("--hang-timeout=" + bad + ": must be a number of seconds"));
}

TEST_CASE("kill timeout: how long a worker may outlive SIGKILL") {
  CHECK(config_of({}).kill_timeout == std::chrono::duration_cast<milliseconds>(cxxrun::agent::kDefaultKillTimeout));
  CHECK(config_of({"--kill-timeout=2"}).kill_timeout == milliseconds(2000));
  CHECK(config_of({"--kill_timeout", "0.5"}).kill_timeout == milliseconds(500));
  CHECK(config_of({}, with("PET_KILL_TIMEOUT", "3")).kill_timeout == milliseconds(3000));
  // No 0: waiting forever for a worker in D state is what it bounds.
  for (std::string bad : {"0", "-1", "soon", "nan", "inf", "", "1e10"})
    CHECK_THAT(refusal({"--kill-timeout=" + bad}), Contains("--kill-timeout=" + bad + ": must be a number of seconds > 0"));
}

TEST_CASE("section timeouts: repeatable, PET_ list, last one wins") {
  auto c = config_of({"--section-timeout=step=30", "--section_timeout", "ckpt.save-1=0.5"});
  CHECK(c.section_timeouts ==
        std::map<std::string, milliseconds>{{"step", milliseconds(30000)},
                                            {"ckpt.save-1", milliseconds(500)}});
  // One value per flag: the program after it is not swallowed.
  CHECK(run({"--section-timeout", "a=1", kProg, "b=2"}).config.command ==
        std::vector<std::string>{kProg, "b=2"});
  CHECK(config_of({"--section-timeout=a=1", "--section-timeout=a=2"}).section_timeouts.at("a") ==
        milliseconds(2000));
  CHECK(config_of({"--section-timeout=a=1,b=2,a=3"}).section_timeouts.size() == 2);

  Env env = with("PET_SECTION_TIMEOUT", "a=1, b=2");
  CHECK(config_of({}, env).section_timeouts ==
        std::map<std::string, milliseconds>{{"a", milliseconds(1000)}, {"b", milliseconds(2000)}});
  // The command line replaces PET_, as for every option.
  CHECK(config_of({"--section-timeout=c=3"}, env).section_timeouts.size() == 1);
  CHECK(config_of({}, with("PET_SECTION_TIMEOUT", "")).section_timeouts.empty());
  CHECK(config_of({"--section-timeout=" + std::string(31, 'x') + "=1"}).section_timeouts.size() ==
        1);

  CHECK_THAT(refusal({"--section-timeout=step"}),
             Contains("--section-timeout=step: 'step' is not NAME=SECONDS"));
  CHECK_THAT(refusal({"--section-timeout="}), Contains("--section-timeout=: '' is not NAME=SECONDS"));
  CHECK_THAT(refusal({"--section-timeout=a b=1"}), Contains("section name 'a b' must be 1..31"));
  CHECK_THAT(refusal({"--section-timeout==1"}), Contains("section name '' must be"));
  std::string long_name(32, 'x');
  CHECK_THAT(refusal({"--section-timeout=" + long_name + "=1"}),
             Contains("section name '" + long_name + "'"));
  for (std::string bad : {"0", "-1", "x", ""})
    CHECK_THAT(refusal({"--section-timeout=step=" + bad}),
               Contains("--section-timeout=step=" + bad + ": section 'step' needs a number of "
                        "seconds > 0"));
  CHECK_THAT(refusal({}, with("PET_SECTION_TIMEOUT", "a=1,b")),
             Contains("PET_SECTION_TIMEOUT=a=1,b: 'b' is not NAME=SECONDS"));
}

TEST_CASE("stack dump signal") {
  CHECK(config_of({"--stack-dump-signal=SIGUSR1"}).stack_dump_signal == SIGUSR1);
  CHECK(config_of({"--stack_dump_signal", "usr2"}).stack_dump_signal == SIGUSR2);
  CHECK(config_of({"--stack-dump-signal=QUIT"}).stack_dump_signal == SIGQUIT);
  CHECK(config_of({"--stack-dump-signal=10"}).stack_dump_signal == 10);
  CHECK(config_of({"--stack-dump-signal=0"}).stack_dump_signal == 0);
  CHECK(config_of({}, with("PET_STACK_DUMP_SIGNAL", "SIGABRT")).stack_dump_signal == SIGABRT);
  for (std::string bad : {"SIGFOO", "", "-3", "999", "1.5"})
    CHECK_THAT(refusal({"--stack-dump-signal=" + bad}),
               Contains("--stack-dump-signal=" + bad + ": not a signal name or number"));
  for (std::string bad : {"SIGKILL", "kill", "9", "STOP", "19"})
    CHECK_THAT(refusal({"--stack-dump-signal=" + bad}),
               Contains("--stack-dump-signal=" + bad + ": SIGKILL and SIGSTOP cannot be caught"));
}

TEST_CASE("file timer from torchrun's variables") {
  CHECK(config_of({}, with("TORCHELASTIC_ENABLE_FILE_TIMER", "1")).file_timer);
  CHECK_FALSE(config_of({}, with("TORCHELASTIC_ENABLE_FILE_TIMER", "0")).file_timer);
  Env env = with("TORCHELASTIC_ENABLE_FILE_TIMER", "1");
  env["TORCHELASTIC_TIMER_FILE"] = "/tmp/watchdog";
  auto c = config_of({}, env);
  CHECK(c.file_timer);
  CHECK(c.file_timer_path == "/tmp/watchdog");
  for (std::string bad : {"true", "yes", "", "2"})
    CHECK_THAT(refusal({}, with("TORCHELASTIC_ENABLE_FILE_TIMER", bad)),
               Contains("TORCHELASTIC_ENABLE_FILE_TIMER=" + bad + ": must be 1"));
}

TEST_CASE("fault specs") {
  auto one = [](const std::string& spec) {
    // A job with every rank, node and attempt targeted below (the bounds:
    // test_options_limits.cc).
    auto faults = config_of({"--nproc-per-node=4", "--max-restarts=2", "--rdzv-backend=c10d",
                             "--rdzv-endpoint=node-17.cluster:29400", "--nnodes=1:2",
                             "--inject-fault=" + spec})
                      .faults;
    REQUIRE(faults.size() == 1);
    return faults[0];
  };
  auto kill = one("kill:rank=1,after=500");
  CHECK(kill.kind == FaultKind::kill);
  CHECK(kill.rank == 1);
  CHECK(kill.after == milliseconds(500));
  CHECK(kill.signal == SIGKILL);
  CHECK(kill.attempt == 0);
  auto term = one("kill:rank=0,after=0,signal=TERM,attempt=2");
  CHECK((term.signal == SIGTERM && term.attempt == 2 && term.rank == 0));
  CHECK(one("kill: rank = 3 , after = 1 , signal = SIGUSR1").signal == SIGUSR1);
  CHECK(one("kill:rank=3,after=1,signal=15").signal == SIGTERM);
  auto stop = one("stop:rank=2,after=100,attempt=1");
  CHECK((stop.kind == FaultKind::stop && stop.rank == 2 && stop.attempt == 1));
  CHECK(stop.after == milliseconds(100));
  auto drop = one("drop_store:node=1,after=2000");
  CHECK((drop.kind == FaultKind::drop_store && drop.node == 1 && drop.after == milliseconds(2000)));
  auto delay = one("delay_store:node=0,ms=50");
  CHECK((delay.kind == FaultKind::delay_store && delay.node == 0 && delay.delay == milliseconds(50)));
}

TEST_CASE("faults add up from the command line and CXXRUN_INJECT_FAULTS") {
  Env env = with("CXXRUN_INJECT_FAULTS", "stop:rank=0,after=1;;delay_store:node=0,ms=5;");
  auto faults = config_of({"--nproc-per-node=4", "--inject-fault", "kill:rank=1,after=2",
                           "--inject_fault=drop_store:node=0,after=3;kill:rank=2,after=4"},
                          env)
                    .faults;
  REQUIRE(faults.size() == 5);
  CHECK((faults[0].kind == FaultKind::kill && faults[0].rank == 1));
  CHECK(faults[1].kind == FaultKind::drop_store);
  CHECK((faults[2].kind == FaultKind::kill && faults[2].rank == 2));
  CHECK(faults[3].kind == FaultKind::stop);
  CHECK(faults[4].kind == FaultKind::delay_store);
  CHECK(config_of({}, with("CXXRUN_INJECT_FAULTS", "")).faults.empty());
  // There is no PET_ fallback for --inject-fault.
  CHECK(config_of({}, with("PET_INJECT_FAULT", "explode")).faults.empty());
}

TEST_CASE("bad fault specs are refused by name") {
  auto refused = [](const std::string& spec, const std::string& rule) {
    CHECK_THAT(refusal({"--inject-fault=" + spec}), Contains("--inject-fault=" + spec + ": " + rule));
  };
  refused("explode:rank=1", "unknown fault kind 'explode'");
  refused("kill", "a kill fault needs rank=");
  refused("kill:rank=1", "a kill fault needs after=");
  refused("stop:after=1", "a stop fault needs rank=");
  refused("drop_store:node=1", "a drop_store fault needs after=");
  refused("delay_store:node=1,after=5", "unknown key 'after' for a delay_store fault");
  refused("stop:rank=1,after=1,signal=TERM", "unknown key 'signal' for a stop fault");
  refused("kill:rank=1,after=1,color=red", "unknown key 'color'");
  refused("kill:rank=-1,after=1", "rank=-1 must be an integer >= 0");
  refused("kill:rank=1,after=soon", "after=soon must be an integer >= 0");
  refused("kill:rank=1,after=1.5", "after=1.5 must be an integer >= 0");
  refused("kill:rank=99999999999,after=1", "rank=99999999999 must be an integer >= 0");
  refused("delay_store:node=0,ms=-5", "ms=-5 must be an integer >= 0");
  refused("kill:rank=1,after=1,attempt=x", "attempt=x must be an integer >= 0");
  refused("kill:rank=1,after=1,signal=SIGFOO", "signal=SIGFOO is not a signal name or number");
  refused("kill:rank=1,rank=2,after=1", "key 'rank' given twice");
  refused("kill:rank,after=1", "'rank' is not KEY=VALUE");
  refused("", "empty fault spec");
  CHECK_THAT(refusal({"--inject-fault=kill:rank=1,after=1;boom"}),
             Contains("--inject-fault=boom: unknown fault kind 'boom'"));
  CHECK_THAT(refusal({}, with("CXXRUN_INJECT_FAULTS", "kill:rank=0,after=1;stop:rank=x,after=1")),
             Contains("CXXRUN_INJECT_FAULTS=stop:rank=x,after=1: rank=x must be"));
}

TEST_CASE("an empty --option= value is empty, as with argparse") {
  // CLI11 alone would take the next word (the program) as the value.
  CHECK_THAT(refusal({"--health-port="}), Contains("--health-port=: must be a port number"));
  CHECK(config_of({"--log-dir="}).log_dir.empty());
  CHECK(run({kProg, "--x=", "--section-timeout="}).config.command ==
        std::vector<std::string>{kProg, "--x=", "--section-timeout="});
}

TEST_CASE("extensions are in --help") {
  std::string help = help_text();
  CHECK_THAT(help, Contains("cxxrun extensions:"));
  for (std::string name : {"--event-log FILE, --event_log FILE", "--health-port PORT",
                           "--health-host HOST", "--heartbeat-timeout SECONDS", "--kill-timeout SECONDS", "--hang-timeout SECONDS",
                           "--section-timeout NAME=SECONDS, --section_timeout NAME=SECONDS",
                           "--stack-dump-signal SIGNAL", "--inject-fault SPEC, --inject_fault SPEC",
                           "TORCHELASTIC_HEALTH_CHECK_PORT", "CXXRUN_INJECT_FAULTS",
                           "TORCHELASTIC_ENABLE_FILE_TIMER"})
    CHECK_THAT(help, Contains(name));
}

TEST_CASE("health checks: the command, its bound, paths with free space, the exclude file") {
  auto c = config_of({});
  CHECK(c.health.command.empty());
  CHECK(c.health.paths.empty());
  CHECK(c.health.exclude_file.empty());
  CHECK(c.health.command_timeout == cxxrun::agent::kDefaultHealthCheckTimeout);
  c = config_of({"--health-check=/opt/site/check-node --quick", "--health-check-timeout=5"});
  CHECK(c.health.command == "/opt/site/check-node --quick");
  CHECK(c.health.command_timeout == milliseconds(5000));
  CHECK(config_of({}, with("PET_HEALTH_CHECK", "nvidia-smi")).health.command == "nvidia-smi");
  c = config_of({"--health-path=/scratch:50G", "--health_path", "/tmp", "--health-path=/data:1.5T"});
  REQUIRE(c.health.paths.size() == 3);
  CHECK(c.health.paths[0].path == "/scratch");
  CHECK(c.health.paths[0].min_free == 50ull << 30);
  CHECK(c.health.paths[1].path == "/tmp");
  CHECK(c.health.paths[1].min_free == 0);
  CHECK(c.health.paths[2].min_free == (3ull << 40) / 2);
  CHECK(config_of({"--health-path=/a:1024"}).health.paths[0].min_free == 1024);
  CHECK(config_of({"--health-path=/a:10k"}).health.paths[0].min_free == 10240);
  c = config_of({}, with("PET_HEALTH_PATH", "/a:1M,/b"));
  REQUIRE(c.health.paths.size() == 2);
  CHECK(c.health.paths[0].min_free == 1ull << 20);
  CHECK(c.health.paths[1].path == "/b");
  TempDir dir;
  const std::string file = (dir.path / "exclude").string();
  CHECK(config_of({"--exclude-file=" + file}).health.exclude_file == file);
  CHECK(config_of({}).health.max_node_failures == 0);
  CHECK(config_of({"--max-node-failures=2"}).health.max_node_failures == 2);
  CHECK(config_of({}, with("PET_MAX_NODE_FAILURES", "3")).health.max_node_failures == 3);
  CHECK_THAT(refusal({"--max-node-failures=-1"}), Contains("--max-node-failures=-1: must be a whole number >= 0"));
  CHECK_THAT(refusal({"--max-node-failures=two"}), Contains("--max-node-failures=two"));
}

TEST_CASE("health checks: bad values name themselves") {
  CHECK_THAT(refusal({"--health-check="}), Contains("--health-check=: needs a command"));
  CHECK_THAT(refusal({"--health-check-timeout=5"}), Contains("--health-check-timeout=5: has no effect without --health-check"));
  CHECK_THAT(refusal({"--health-check=true", "--health-check-timeout=0"}), Contains("must be a number of seconds > 0"));
  CHECK_THAT(refusal({"--health-path=scratch"}), Contains("--health-path=scratch: needs an absolute PATH[:MIN_FREE]"));
  CHECK_THAT(refusal({"--health-path=/scratch:lots"}),
             Contains("--health-path=/scratch:lots: 'lots' is not a free-space minimum"));
  CHECK_THAT(refusal({"--health-path=/scratch:-5G"}), Contains("is not a free-space minimum"));
  CHECK_THAT(refusal({"--exclude-file=/nonexistent/dir/x"}),
             Contains("--exclude-file=/nonexistent/dir/x: directory /nonexistent/dir does not exist"));
}

TEST_CASE("node group: the flag, PET_NODE_GROUP, or Slurm's leaf switch") {
  CHECK(config_of({}).rdzv.settings.node_group.empty());
  CHECK(config_of({"--node-group=nvl72-a"}).rdzv.settings.node_group == "nvl72-a");
  CHECK(config_of({}, with("PET_NODE_GROUP", "rack7")).rdzv.settings.node_group == "rack7");
  Env slurm = with("SLURM_TOPOLOGY_ADDR", "core.leaf3.node12");
  CHECK(config_of({}, slurm).rdzv.settings.node_group == "core.leaf3");
  CHECK(config_of({"--node-group=mine"}, slurm).rdzv.settings.node_group == "mine");
  CHECK(config_of({}, with("SLURM_TOPOLOGY_ADDR", "node12")).rdzv.settings.node_group.empty());
  CHECK_THAT(refusal({"--node-group=a|b"}), Contains("--node-group=a|b: must be 1..128 characters, without '|'"));
  CHECK_THAT(refusal({"--node-group="}), Contains("--node-group=: must be 1..128 characters"));
}
