#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

#include "launcher/devices.h"
#include "launcher/options.h"
#include "rendezvous/endpoint.h"

using namespace cxxrun::launcher;
using Catch::Contains;
using cxxrun::agent::Std;
namespace fs = std::filesystem;

namespace {

// PATH from the real environment, and a master port nobody uses, so tests do
// not depend on (or collide with) a job that holds 29500.
Env base_env() {
  const char* path = std::getenv("PATH");
  return {{"PATH", path != nullptr ? path : "/usr/bin:/bin"},
          {"PET_MASTER_PORT", std::to_string(cxxrun::rendezvous::pick_free_port("127.0.0.1"))}};
}

Parsed run(std::vector<std::string> args, const Env& env = base_env()) { return parse(args, env); }

struct Failure {
  std::string message;
  bool not_built_yet = false;
};

Failure failure(std::vector<std::string> args, const Env& env = base_env()) {
  try {
    parse(args, env);
  } catch (const NotBuiltYet& e) {
    return {e.what(), true};
  } catch (const UsageError& e) {
    return {e.what(), false};
  }
  std::string line;
  for (const std::string& a : args) line += " " + a;
  FAIL("parse accepted a command line it should refuse:" << line);
  return {};
}

// A scratch directory with helpers to drop files into it.
struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "cxxrun_test_XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name, const std::string& bytes, mode_t mode) const {
    fs::path p = path / name;
    std::ofstream(p, std::ios::binary) << bytes;
    chmod(p.c_str(), mode);
    return p.string();
  }
};

struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(listen(fd, 1) == 0);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    port = ntohs(addr.sin_port);
  }
  ~Listener() { close(fd); }
};

const std::string kElf = std::string(
                             "\x7f"
                             "ELF\x02\x01\x01",
                             7) +
                         std::string(64, '\0');
const std::string kProg = "/bin/true";  // an ELF executable on every Debian

}  // namespace

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
  CHECK_FALSE(c.use_agent_store);
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

TEST_CASE("default master port is 29500") {
  if (cxxrun::rendezvous::port_in_use("127.0.0.1", 29500)) return;  // another job holds it
  Env env = base_env();
  env.erase("PET_MASTER_PORT");
  CHECK(run({kProg}, env).config.master_port == 29500);
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
  std::tie(a, b) = same({"--log-dir=/tmp/x"}, {"--log_dir", "/tmp/x"});
  CHECK((a.log_dir == "/tmp/x" && b.log_dir == "/tmp/x"));
  std::tie(a, b) = same({"--local-ranks-filter=0,2"}, {"--local_ranks_filter=0,2"});
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
  env["PET_LOG_DIR"] = "/tmp/env-logs";
  env["PET_REDIRECTS"] = "1";
  Parsed p = run({kProg}, env);
  CHECK(p.config.nproc_per_node == 3);
  CHECK(p.config.max_restarts == 4);
  CHECK(p.config.role == "trainer");
  CHECK(p.config.run_id == "from-env");
  CHECK(p.config.log_dir == "/tmp/env-logs");
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

TEST_CASE("PET_ flags read 0 or 1 only") {
  Env env = base_env();
  env["PET_STANDALONE"] = "1";
  Parsed p = run({kProg}, env);
  CHECK(p.config.run_id != "none");  // a fresh uuid
  env["PET_STANDALONE"] = "0";
  CHECK(run({kProg}, env).config.run_id == "none");

  env["PET_STANDALONE"] = "true";
  Failure f = failure({kProg}, env);
  CHECK_THAT(f.message, Contains("PET_STANDALONE=true"));
  CHECK_THAT(f.message, Contains("0 or 1"));
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
  CHECK_THAT(failure({"--nproc", "2", kProg}).message, Contains("unrecognized option --nproc"));
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
  CHECK_THAT(message({"--signals-to-handle=SIGTERM,SIGFOO"}), Contains("SIGFOO"));
  CHECK_THAT(message({"--signals-to-handle=SIGKILL"}), Contains("SIGKILL cannot be caught"));
  CHECK_THAT(message({"--signals-to-handle=STOP"}), Contains("STOP cannot be caught"));
  CHECK_THAT(message({"--master-port=0"}), Contains("--master-port=0"));
  CHECK_THAT(message({"--master-port=70000"}), Contains("1..65535"));
  CHECK_THAT(message({"--master-port=http"}), Contains("--master-port=http"));
  CHECK_THAT(message({"--node-rank=1"}), Contains("--node-rank=1"));
  CHECK_THAT(message({"--shutdown-timeout=0"}), Contains("--shutdown-timeout=0"));
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
  fs::path old = fs::current_path();
  fs::current_path(dir.path);
  Parsed p = run({"train", "x"});
  fs::current_path(old);
  CHECK(p.config.command == std::vector<std::string>{"./train", "x"});
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

TEST_CASE("standalone: fresh uuid and a free port on every parse") {
  static const std::regex uuid4(
      "[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");
  // Explicit rendezvous options are ignored, as in torchrun.
  Parsed a = run({"--standalone", "--rdzv-id=x", "--rdzv-backend=etcd", kProg});
  CHECK(std::regex_match(a.config.run_id, uuid4));
  CHECK(a.config.master_addr == "127.0.0.1");
  CHECK_FALSE(cxxrun::rendezvous::port_in_use("127.0.0.1", a.config.master_port));

  // Hold the first job's port, as its worker would.
  Listener held;
  Parsed b = run({"--standalone", kProg});
  CHECK(std::regex_match(b.config.run_id, uuid4));
  CHECK(b.config.run_id != a.config.run_id);
  CHECK(b.config.master_port != held.port);
}

TEST_CASE("static backend: a master port already in use is refused, naming it") {
  Listener held;
  std::string port = std::to_string(held.port);
  Failure f = failure({"--master-port=" + port, kProg});
  CHECK_THAT(f.message, Contains("--master-port=" + port));
  CHECK_THAT(f.message, Contains("port " + port + " is already in use"));
  CHECK_FALSE(f.not_built_yet);
  // An explicit static endpoint replaces --master-addr/--master-port.
  CHECK_THAT(failure({"--rdzv-endpoint=127.0.0.1:" + port, kProg}).message, Contains("in use"));
  Parsed p = run({"--rdzv-endpoint=localhost:" +
                      std::to_string(cxxrun::rendezvous::pick_free_port("127.0.0.1")),
                  kProg});
  CHECK(p.config.master_addr == "localhost");
  CHECK_THAT(failure({"--rdzv-endpoint=localhost", kProg}).message, Contains("port is missing"));
  // IPv6 master address loses its brackets.
  CHECK(run({"--master-addr=[::1]", kProg}).config.master_addr == "::1");
}

TEST_CASE("features that are not built yet say so") {
  Failure f = failure({"--nnodes=2", kProg});
  CHECK(f.not_built_yet);
  CHECK(f.message ==
        "multi-node rendezvous (--nnodes=2) is not built yet: this cxxrun runs single-node jobs");
  CHECK(failure({"--nnodes=1:2", kProg}).not_built_yet);
  Env env = base_env();
  env["PET_NNODES"] = "4";
  CHECK_THAT(failure({kProg}, env).message, Contains("(PET_NNODES=4) is not built yet"));
  CHECK_NOTHROW(run({"--nnodes=1:1", kProg}));

  CHECK(failure({"--numa-binding=node", kProg}).not_built_yet);
  CHECK(failure({"--event-log-handler=console", kProg}).not_built_yet);
  f = failure({"--rdzv-backend=c10d", "--rdzv-endpoint=node-17.cluster:29400", kProg});
  CHECK(f.not_built_yet);
  CHECK_THAT(f.message, Contains("node-17.cluster:29400"));
  CHECK(failure({"--rdzv-backend=c10d", "--rdzv-endpoint=0.0.0.0:29400", kProg}).not_built_yet);

  f = failure({"--rdzv-backend=etcd-v2", kProg});
  CHECK_FALSE(f.not_built_yet);
  CHECK_THAT(f.message, Contains("not supported by cxxrun"));
  f = failure({"--logs-specs=mine", kProg});
  CHECK_FALSE(f.not_built_yet);
  CHECK_THAT(f.message, Contains("--logs-specs=mine: not supported"));
}

TEST_CASE("c10d on a local endpoint runs single-node with the given id") {
  Parsed p = run({"--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0", "--rdzv-id=job7", kProg});
  CHECK(p.config.run_id == "job7");
  CHECK(p.config.master_addr == "127.0.0.1");
  CHECK(p.config.master_port > 0);
  p = run({"--rdzv_backend=c10d", kProg});
  REQUIRE(p.warnings.size() == 1);
  CHECK_THAT(p.warnings[0], Contains("master_addr is only used for static rdzv_backend"));
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
  CHECK(version_text() == "cxxrun 0.1.0");

  std::string help = help_text();
  CHECK(help.starts_with("usage: cxxrun [-h] [--nnodes NNODES] [--nproc-per-node NPROC_PER_NODE]"));
  CHECK_THAT(help, Contains("training_script ..."));
  CHECK_THAT(help, Contains("--nproc-per-node NPROC_PER_NODE, --nproc_per_node NPROC_PER_NODE"));
  CHECK_THAT(help, Contains("-r REDIRECTS, --redirects REDIRECTS"));
  CHECK_THAT(help, Contains("--start-method {spawn,fork,forkserver}"));
  CHECK_THAT(help, Contains("--no-python, --no_python"));
  CHECK_THAT(help, Contains("--signals-to-handle"));
}
