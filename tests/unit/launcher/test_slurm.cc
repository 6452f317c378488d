// Slurm with no glue (launcher/slurm.h) and its host lists
// (launcher/hostlist.h), with SLURM_* set by hand: layouts a two-node test
// cluster cannot make.
#include "launcher/hostlist.h"
#include "options_fixture.h"

using cxxrun::launcher::expand_hostlist;
using Hosts = std::vector<std::string>;

TEST_CASE("slurm host list: ranges keep their padding, entries and groups in order") {
  CHECK(expand_hostlist("n1") == Hosts{"n1"});
  CHECK(expand_hostlist("n1,n2") == Hosts{"n1", "n2"});
  CHECK(expand_hostlist("gpu[001-004,010],cpu-a[1-2]") ==
        Hosts{"gpu001", "gpu002", "gpu003", "gpu004", "gpu010", "cpu-a1", "cpu-a2"});
  CHECK(expand_hostlist("node[8-11]") == Hosts{"node8", "node9", "node10", "node11"});
  CHECK(expand_hostlist("rack[1-2]-n[01-02]") == Hosts{"rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"});
  CHECK(expand_hostlist("a[07]x") == Hosts{"a07x"});
  CHECK(expand_hostlist("h.example.org,g[1-2].example.org") ==
        Hosts{"h.example.org", "g1.example.org", "g2.example.org"});
  for (const char* bad : {"", "n[1-2", "n1-2]", "n[2-1]", "n[a-b]", "n[[1]]", "n[1-]", "n[0-99999999]"})
    CHECK_THROWS_AS(expand_hostlist(bad), std::invalid_argument);
  CHECK_THROWS_WITH(expand_hostlist("n[1-20]", 10), Catch::Contains("more than 10 hosts"));
}

namespace {

// An srun step as Slurm 22.05 sets it: one task per node.
Env step(int nodes, int node, const std::string& list) {
  Env env = options_test::base_env();
  env.insert({{"SLURM_JOB_ID", "4242"}, {"SLURM_STEP_ID", "0"}, {"SLURM_STEP_NUM_NODES", std::to_string(nodes)},
              {"SLURM_JOB_NUM_NODES", std::to_string(nodes)}, {"SLURM_NODEID", std::to_string(node)},
              {"SLURM_STEP_NODELIST", list}, {"SLURM_JOB_NODELIST", list},
              {"SLURM_STEP_NUM_TASKS", std::to_string(nodes)}, {"SLURM_NTASKS", std::to_string(nodes)}});
  return env;
}

// Node names that do not resolve here: the address is the name, marked.
std::string fake_address(const std::string& name) { return name + ".addr"; }

Parsed in_step(const std::vector<std::string>& args, const Env& env) {
  return cxxrun::launcher::parse(args, env, fake_address);
}

}  // namespace

TEST_CASE("slurm: a step's layout becomes a c10d job across its nodes") {
  options_test::TempDir dir;
  const std::string prog = dir.file("train", kElf, 0755);
  Parsed p = in_step({prog}, step(8, 5, "gpu[001-004,010],cpu-a[1-3]"));
  CHECK(p.config.rdzv.backend == cxxrun::rendezvous::Backend::c10d);
  CHECK(p.config.rdzv.settings.min_nodes == 8);
  CHECK(p.config.rdzv.settings.max_nodes == 8);
  CHECK(p.config.rdzv.host == "gpu001.addr");
  CHECK(p.config.rdzv.port == 29400);
  CHECK(p.config.run_id == "slurm-4242.0");
  CHECK(p.config.rdzv.settings.node_order == 5);  // group rank 0 on the step's first node
  CHECK(p.config.nproc_per_node == 1);
  CHECK(std::find(p.config.signals_to_handle.begin(), p.config.signals_to_handle.end(), SIGUSR1) !=
        p.config.signals_to_handle.end());
  // A preemption warning reaches the workers and does not end the job.
  CHECK(p.config.forward_only_signals == std::set<int>{SIGUSR1});
  REQUIRE_FALSE(p.notes.empty());
  CHECK_THAT(p.notes.front(), Contains("Slurm job 4242 step 0: node 5 of 8, rendezvous c10d at gpu001.addr:29400"));

  // The step's list, not the job's: a step may use part of the allocation.
  Env part = step(2, 1, "b[3-4]");
  part["SLURM_JOB_NODELIST"] = "b[1-4]";
  part["SLURM_JOB_NUM_NODES"] = "4";
  p = in_step({prog}, part);
  CHECK(p.config.rdzv.host == "b3.addr");
  CHECK(p.config.rdzv.settings.max_nodes == 2);
  // Without step variables, the job's.
  Env job_only = step(3, 0, "c[7-9]");
  for (const char* k : {"SLURM_STEP_NUM_NODES", "SLURM_STEP_NODELIST", "SLURM_STEP_NUM_TASKS"}) job_only.erase(k);
  p = in_step({prog}, job_only);
  CHECK(p.config.rdzv.host == "c7.addr");
  CHECK(p.config.rdzv.settings.max_nodes == 3);
}

TEST_CASE("slurm: GPUs per node, the port, and the static backend") {
  options_test::TempDir dir;
  const std::string prog = dir.file("train", kElf, 0755);
  Env env = step(2, 1, "n[1-2]");
  env["SLURM_GPUS_ON_NODE"] = "4";
  Parsed p = in_step({prog}, env);
  CHECK(p.config.nproc_per_node == 4);
  CHECK_THAT(p.notes.front(), Contains("4 workers (SLURM_GPUS_ON_NODE=4)"));
  env.erase("SLURM_GPUS_ON_NODE");
  env["SLURM_STEP_GPUS"] = "0,1,2";
  CHECK(in_step({prog}, env).config.nproc_per_node == 3);
  CHECK(in_step({"--nproc-per-node=2", prog}, env).config.nproc_per_node == 2);  // the user's wins

  p = in_step({"--rdzv-endpoint=:29777", prog}, env);
  CHECK(p.config.rdzv.host == "n1.addr");
  CHECK(p.config.rdzv.port == 29777);
  CHECK(in_step({"--rdzv-id=mine", prog}, env).config.run_id == "mine");

  p = in_step({"--rdzv-backend=static", prog}, env);
  CHECK(p.config.rdzv.backend == cxxrun::rendezvous::Backend::static_tcp);
  CHECK(p.config.rdzv.node_rank == 1);
  CHECK(p.config.master_addr == "n1.addr");
}

TEST_CASE("slurm: the user's layout, --no-slurm, or no step: nothing is derived") {
  options_test::TempDir dir;
  const std::string prog = dir.file("train", kElf, 0755);
  const Env env = step(2, 1, "n[1-2]");
  for (auto args : std::vector<std::vector<std::string>>{
           {"--nnodes=1", prog}, {"--standalone", prog}, {"--no-slurm", prog}, {"--node-rank=0", prog},
           {"--master-addr=127.0.0.1", prog}, {"--rdzv-endpoint=127.0.0.1:29999", "--nnodes=2", prog}}) {
    Parsed p = in_step(args, env);
    CHECK((p.notes.empty() || p.notes.front().find("Slurm job") == std::string::npos));
    CHECK(p.config.rdzv.settings.max_nodes <= 2);
    CHECK(p.config.run_id != "slurm-4242.0");
  }
  Env pet = env;
  pet["PET_NNODES"] = "1";
  CHECK(in_step({prog}, pet).config.run_id != "slurm-4242.0");
  Env batch = env;  // the batch script itself is not a step
  batch.erase("SLURM_STEP_ID");
  CHECK(in_step({prog}, batch).config.run_id != "slurm-4242.0");
}

TEST_CASE("slurm: two cxxrun tasks on a node, or broken variables, are refused") {
  options_test::TempDir dir;
  const std::string prog = dir.file("train", kElf, 0755);
  Env env = step(2, 0, "n[1-2]");
  env["SLURM_STEP_NUM_TASKS"] = "4";
  env["SLURM_STEP_TASKS_PER_NODE"] = "2(x2)";
  auto message = [&](const Env& e) {
    try {
      in_step({prog}, e);
    } catch (const cxxrun::launcher::UsageError& error) {
      return std::string(error.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(message(env), Contains("SLURM_STEP_NUM_TASKS=4 with SLURM_STEP_NUM_NODES=2") &&
                               Contains("srun --ntasks-per-node=1"));
  env = step(2, 2, "n[1-2]");
  CHECK_THAT(message(env), Contains("SLURM_NODEID=2: must be below SLURM_STEP_NUM_NODES=2"));
  env = step(2, 0, "n[1-2");
  CHECK_THAT(message(env), Contains("SLURM_STEP_NODELIST=n[1-2: unclosed '['"));
  env = step(2, 0, "n[1-2]");
  env["SLURM_STEP_NUM_NODES"] = "two";
  CHECK_THAT(message(env), Contains("SLURM_STEP_NUM_NODES=two"));
}

TEST_CASE("slurm: SIGUSR1 that the user lists ends the job, as in torch") {
  options_test::TempDir dir;
  const std::string prog = dir.file("train", kElf, 0755);
  Parsed p = in_step({"--signals-to-handle=SIGTERM,SIGUSR1", prog}, step(2, 1, "n[1-2]"));
  CHECK(p.config.forward_only_signals.empty());
}
