// Values that are well-formed but cannot work on this job or this machine:
// local ranks and fault targets outside the job, a worker count above the
// per-node cap or RLIMIT_NPROC, an unknown LOGLEVEL, a log directory that
// cannot be written, a busy health port. Each is one line naming the value.
#include <sys/resource.h>

#include "options_fixture.h"

namespace {

// Lowers this process's soft RLIMIT_NPROC for one scope. parse() forks
// nothing, so the lower limit cannot trip the test itself.
struct ProcessLimit {
  rlimit saved{};
  explicit ProcessLimit(rlim_t soft) {
    REQUIRE(getrlimit(RLIMIT_NPROC, &saved) == 0);
    rlimit lowered = saved;
    lowered.rlim_cur = std::min(soft, saved.rlim_max);
    REQUIRE(setrlimit(RLIMIT_NPROC, &lowered) == 0);
  }
  ~ProcessLimit() { setrlimit(RLIMIT_NPROC, &saved); }
};

}  // namespace

TEST_CASE("local ranks filter: ranks this node lacks are left out with a warning") {
  CHECK(run({"--nproc-per-node=2", "--local-ranks-filter=0,1", kProg}).config.local_ranks_filter ==
        std::set<int>{0, 1});
  // torch shows rank 0 and goes on.
  Env env = with("OMP_NUM_THREADS", "1");  // no OMP banner among the warnings
  Parsed p = run({"--nproc-per-node=2", "--local-ranks-filter=0,5", kProg}, env);
  CHECK(p.config.local_ranks_filter == std::set<int>{0});
  REQUIRE(p.warnings.size() == 1);
  CHECK(p.warnings[0] == "--local-ranks-filter=0,5: local rank 5 not on this node (--nproc-per-node=2 gives local "
                         "ranks 0..1); showing 0");
  p = run({"--nproc-per-node=3", "--local-ranks-filter=7,1,9", kProg}, env);
  CHECK(p.config.local_ranks_filter == std::set<int>{1});
  REQUIRE(p.warnings.size() == 1);
  CHECK_THAT(p.warnings[0], Contains("local ranks 7, 9 not on this node"));
  // None that exist would hide all output: still refused.
  CHECK_THAT(refusal({"--nproc-per-node=2", "--local-ranks-filter=9"}),
             Contains("--local-ranks-filter=9: no such local rank: --nproc-per-node=2 gives local ranks 0..1"));
  CHECK_THAT(refusal({"--local-ranks-filter=1,2"}),
             Contains("--local-ranks-filter=1,2: no such local rank: --nproc-per-node=1 gives local ranks 0..0"));
  CHECK_THAT(refusal({"--local-ranks-filter=1"}, with("PET_NPROC_PER_NODE", "1")),
             Contains("PET_NPROC_PER_NODE=1 gives local ranks 0..0"));
  // A device name counts as what it resolved to.
  std::string cpus = std::to_string(cpu_count());
  CHECK_THAT(refusal({"--nproc-per-node=cpu", "--local-ranks-filter=" + cpus}),
             Contains("--local-ranks-filter=" + cpus + ": no such local rank: --nproc-per-node=cpu gives local ranks 0.." +
                      std::to_string(cpu_count() - 1)));
}

TEST_CASE("fault targets must exist in the largest job --nnodes allows") {
  auto faults = [](std::vector<std::string> args) {
    args.push_back(kProg);
    return run(args).config.faults.size();
  };
  CHECK(faults({"--nproc-per-node=2", "--inject-fault=kill:rank=1,after=1"}) == 1);
  // c10d: up to 3 nodes of 2 workers, so ranks 0..5 and nodes 0..2.
  std::vector<std::string> c10d{"--nproc-per-node=2", "--rdzv-backend=c10d",
                                "--rdzv-endpoint=node-17.cluster:29400", "--nnodes=1:3"};
  auto with_fault = [&](const std::string& spec) {
    std::vector<std::string> args = c10d;
    args.push_back("--inject-fault=" + spec);
    return args;
  };
  CHECK(faults(with_fault("kill:rank=5,after=1")) == 1);
  CHECK(faults(with_fault("drop_store:node=2,after=1")) == 1);
  CHECK(faults({"--max-restarts=2", "--inject-fault=stop:rank=0,after=1,attempt=2"}) == 1);

  CHECK_THAT(refusal({"--nproc-per-node=2", "--inject-fault=kill:rank=99,after=100"}),
             Contains("--inject-fault=kill:rank=99,after=100: rank=99 is out of range: the job "
                      "has at most 2 workers (2 per node x 1 node), ranks 0..1"));
  CHECK_THAT(refusal(with_fault("kill:rank=6,after=1")),
             Contains("rank=6 is out of range: the job has at most 6 workers (2 per node x 3 "
                      "nodes), ranks 0..5"));
  CHECK_THAT(refusal({"--inject-fault=stop:rank=1,after=1"}), Contains("rank=1 is out of range"));
  CHECK_THAT(refusal(with_fault("delay_store:node=3,ms=5")),
             Contains("--inject-fault=delay_store:node=3,ms=5: node=3 is out of range: the job "
                      "has at most 3 nodes, node ranks 0..2"));
  CHECK_THAT(refusal({"--inject-fault=drop_store:node=1,after=1"}),
             Contains("node=1 is out of range: the job has at most 1 node, node ranks 0..0"));
  CHECK_THAT(refusal({"--inject-fault=kill:rank=0,after=1,attempt=1"}),
             Contains("--inject-fault=kill:rank=0,after=1,attempt=1: attempt=1 never comes: "
                      "--max-restarts=0 allows attempts 0..0"));
  CHECK_THAT(refusal({}, with("CXXRUN_INJECT_FAULTS", "kill:rank=0,after=1;kill:rank=3,after=1")),
             Contains("CXXRUN_INJECT_FAULTS=kill:rank=3,after=1: rank=3 is out of range"));
}

TEST_CASE("nproc-per-node: at most 4096 workers per node") {
  CHECK(run({"--nproc-per-node=4096", kProg}).config.nproc_per_node == 4096);
  CHECK_THAT(refusal({"--nproc-per-node=4097"}),
             Contains("--nproc-per-node=4097: at most 4096 workers per node"));
  CHECK_THAT(refusal({"--nproc-per-node=99999"}), Contains("--nproc-per-node=99999: at most 4096"));
  CHECK_THAT(refusal({}, with("PET_NPROC_PER_NODE", "100000")),
             Contains("PET_NPROC_PER_NODE=100000: at most 4096"));
  std::vector<std::string> notes;
  CHECK_THROWS_WITH(resolve_nproc({"cpu", "--nproc-per-node"}, {5000, 0}, notes),
                    "--nproc-per-node=cpu: at most 4096 workers per node (5000 workers here)");
}

TEST_CASE("nproc-per-node: no more workers than RLIMIT_NPROC lets this user start") {
  ProcessLimit limit(10);
  // The agent and its guardian count too: 8 workers fit in 10, 9 do not.
  CHECK(run({"--nproc-per-node=8", kProg}).config.nproc_per_node == 8);
  CHECK_THAT(refusal({"--nproc-per-node=9"}),
             Contains("--nproc-per-node=9: 9 workers, the agent and its guardian are more "
                      "processes than RLIMIT_NPROC allows this user (ulimit -u: 10)"));
  std::vector<std::string> notes;
  CHECK(resolve_nproc({"gpu", "--nproc-per-node"}, {64, 8, 10}, notes) == 8);
  CHECK_THROWS_WITH(resolve_nproc({"auto", "--nproc-per-node"}, {64, 0, 10}, notes),
                    Contains("--nproc-per-node=auto: 64 workers, the agent"));
  CHECK(resolve_nproc({"64", "--nproc-per-node"}, {8, 0, -1}, notes) == 64);  // RLIM_INFINITY
}

TEST_CASE("LOGLEVEL: Python's level names, upper case, or nothing") {
  CHECK(run({kProg}).log_level == "INFO");
  const std::map<std::string, std::string> levels = {
      {"DEBUG", "DEBUG"}, {"INFO", "INFO"},         {"WARNING", "WARNING"}, {"WARN", "WARNING"},
      {"ERROR", "ERROR"}, {"CRITICAL", "CRITICAL"}, {"FATAL", "CRITICAL"},  {"NOTSET", "INFO"}};
  for (const auto& [given, level] : levels) CHECK(run({kProg}, with("LOGLEVEL", given)).log_level == level);
  CHECK_THAT(refusal({}, with("LOGLEVEL", "garbage")),
             Contains("LOGLEVEL=garbage: not a log level (DEBUG, INFO, WARNING, WARN, ERROR, "
                      "CRITICAL, FATAL or NOTSET)"));
  CHECK_THAT(refusal({}, with("LOGLEVEL", "debug")),
             Contains("LOGLEVEL=debug: not a log level; names are upper case, as in Python's "
                      "logging: LOGLEVEL=DEBUG"));
  CHECK_THAT(refusal({}, with("LOGLEVEL", "")), Contains("LOGLEVEL=: not a log level"));
  CHECK_THAT(refusal({}, with("LOGLEVEL", "10")), Contains("LOGLEVEL=10: not a log level"));
}

TEST_CASE("log dir: created if missing, refused when it cannot be written") {
  TempDir dir;
  std::string fresh = (dir.path / "a" / "b").string();
  CHECK(run({"--log-dir=" + fresh, kProg}).config.log_dir == fresh);
  CHECK(fs::is_directory(fresh));
  CHECK(run({"--log-dir=/dev/null", kProg}).config.log_dir == "/dev/null");

  std::string file = dir.file("plain", "x", 0644);
  CHECK_THAT(refusal({"--log-dir=" + file + "/logs"}),
             Contains("--log-dir=" + file + "/logs: cannot create directory " + file +
                      "/logs: Not a directory"));
  CHECK_THAT(refusal({"--log-dir=" + file}),
             Contains("--log-dir=" + file + ": " + file + " is not a directory"));
  CHECK_THAT(refusal({}, with("PET_LOG_DIR", "/proc/cxxrun-logs")),
             Contains("PET_LOG_DIR=/proc/cxxrun-logs: cannot create directory /proc/cxxrun-logs"));
  // Exists, but nothing can be created in it (root would not see a 0500 directory this way).
  CHECK_THAT(refusal({"--log-dir=/proc/self"}),
             Contains("--log-dir=/proc/self: cannot create files in directory /proc/self"));
}

TEST_CASE("health port: a busy port is refused before anything starts") {
  Listener held;
  std::string port = std::to_string(held.port);
  CHECK_THAT(refusal({"--health-port=" + port, "--health-host=127.0.0.1"}),
             Contains("--health-port=" + port + ": port " + port +
                      " is already in use on 127.0.0.1; pick another port, or 0 for any free one"));
  CHECK_THAT(refusal({"--health-port=" + port, "--health-host=localhost"}),
             Contains("is already in use on localhost"));
  CHECK_THAT(refusal({"--health-port=" + port, "--health-host="}),
             Contains("is already in use on every interface"));
  CHECK_THAT(refusal({}, with("TORCHELASTIC_HEALTH_CHECK_PORT", port)),
             Contains("TORCHELASTIC_HEALTH_CHECK_PORT=" + port + ": port " + port +
                      " is already in use"));
  // 0 asks for any free port; nothing to check.
  CHECK(run({"--health-port=0", kProg}).config.health_port == 0);
  CHECK_THAT(refusal({"--health-port=0", "--health-host=192.0.2.1"}),
             Contains("--health-host=192.0.2.1: not an address of this machine"));
}

TEST_CASE("health server: loopback unless --health-host says otherwise") {
  CHECK(run({"--health-port=0", kProg}).config.health_host == "127.0.0.1");
  CHECK(run({kProg}, with("TORCHELASTIC_HEALTH_CHECK_PORT", "0")).config.health_host == "127.0.0.1");
  CHECK(run({"--health-port=0", "--health-host=", kProg}).config.health_host.empty());
  CHECK(run({"--health-port=0", "--health-host=::1", kProg}).config.health_host == "::1");
  CHECK_THAT(help_text(), Contains("(default: 127.0.0.1"));
}
