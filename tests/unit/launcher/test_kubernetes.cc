// cxxrun as a Kubernetes container's entrypoint: the environment that each
// operator sets, and nothing on the command line but the program
// (docs/torchrun-compat.md, "Kubernetes"; launcher/kubeflow.h).
#include "options_fixture.h"

namespace {

Env with_env(std::initializer_list<std::pair<const std::string, std::string>> vars) {
  Env env = options_test::base_env();
  env.erase("PET_MASTER_PORT");  // the operators say which port
  for (const auto& v : vars) env[v.first] = v.second;
  return env;
}

}  // namespace

TEST_CASE("kubernetes: a Kubeflow PyTorchJob with an elasticPolicy runs c10d from PET_* alone") {
  // What the training operator sets for elasticPolicy {minReplicas: 1,
  // maxReplicas: 2, maxRestarts: 100, nProcPerNode: 2, rdzvId, rdzvConf}.
  const Env env = with_env({{"PYTHONUNBUFFERED", "0"},
                            {"PET_RDZV_ENDPOINT", "pj-worker-0:23456"},
                            {"PET_RDZV_BACKEND", "c10d"},
                            {"PET_NNODES", "1:2"},
                            {"PET_MAX_RESTARTS", "100"},
                            {"PET_NPROC_PER_NODE", "2"},
                            {"PET_RDZV_ID", "pj"},
                            {"PET_RDZV_CONF", "join_timeout=60,last_call_timeout=5"}});
  Parsed p = run({kProg}, env);
  CHECK(p.config.rdzv.backend == cxxrun::rendezvous::Backend::c10d);
  CHECK(p.config.rdzv.host == "pj-worker-0");
  CHECK(p.config.rdzv.port == 23456);
  CHECK(p.config.rdzv.settings.min_nodes == 1);
  CHECK(p.config.rdzv.settings.max_nodes == 2);
  CHECK(p.config.rdzv.settings.join_timeout == std::chrono::seconds(60));
  CHECK(p.config.rdzv.settings.last_call_timeout == std::chrono::seconds(5));
  CHECK(p.config.max_restarts == 100);
  CHECK(p.config.nproc_per_node == 2);
  CHECK(p.config.run_id == "pj");

  // elasticPolicy.standalone: the operator writes PET_STANDALONE="".
  Env standalone = with_env({{"PET_STANDALONE", ""}, {"PET_NPROC_PER_NODE", "2"}});
  p = run({kProg}, standalone);
  CHECK(p.config.rdzv.backend == cxxrun::rendezvous::Backend::local);
  CHECK(p.config.run_id != "none");
}

TEST_CASE("kubernetes: a PyTorchJob's Master replica is found by MASTER_ADDR and MASTER_PORT") {
  // No elasticPolicy, a Master and a Worker replica, nprocPerNode "2": the
  // worker pod (replica index 0, node rank 1).
  const Env env = with_env({{"PYTHONUNBUFFERED", "0"},
                            {"MASTER_PORT", "23456"},
                            {"MASTER_ADDR", "pj-master-0"},
                            {"WORLD_SIZE", "4"},
                            {"RANK", "1"},
                            {"PET_NPROC_PER_NODE", "2"},
                            {"PET_NODE_RANK", "1"},
                            {"PET_NNODES", "2"}});
  Parsed p = run({kProg}, env);
  CHECK(p.config.rdzv.backend == cxxrun::rendezvous::Backend::static_tcp);
  CHECK(p.config.master_addr == "pj-master-0");
  CHECK(p.config.master_port == 23456);
  CHECK(p.config.group_rank == 1);
  CHECK(p.config.nproc_per_node == 2);
  REQUIRE_FALSE(p.notes.empty());
  CHECK_THAT(p.notes.front(), Contains("--master-addr=pj-master-0 from MASTER_ADDR and --master-port=23456 from "
                                       "MASTER_PORT"));

  // Whatever the user or PET_* says wins; a user who names the master
  // spells out its port too (torchrun's 29500 by default).
  p = run({"--master-addr=10.0.0.7", kProg}, env);
  CHECK(p.config.master_addr == "10.0.0.7");
  CHECK(p.config.master_port == 29500);
  Env pet = env;
  pet["PET_MASTER_ADDR"] = "10.0.0.8";
  pet["PET_MASTER_PORT"] = "29501";
  p = run({kProg}, pet);
  CHECK(p.config.master_addr == "10.0.0.8");
  CHECK(p.config.master_port == 29501);
  // One node, or a rendezvous through an endpoint, has no use for them.
  Env one = env;
  one["PET_NNODES"] = "1";
  one["PET_NODE_RANK"] = "0";
  p = run({kProg}, one);
  CHECK(p.config.master_addr == "127.0.0.1");
  p = run({"--rdzv-backend=c10d", "--rdzv-endpoint=127.0.0.1:29400", kProg}, env);
  CHECK(p.config.rdzv.host == "127.0.0.1");
  for (const auto& note : p.notes) CHECK_THAT(note, !Contains("MASTER_ADDR"));
}

TEST_CASE("kubernetes: Kubeflow Trainer v2 (JobSet) sets the static layout in PET_* alone") {
  // The torch runtime's TrainJob with numNodes 2: node rank from the Job's
  // completion index, nproc "auto" unless numProcPerNode says otherwise.
  const Env env = with_env({{"PET_NNODES", "2"},
                            {"PET_NPROC_PER_NODE", "3"},
                            {"PET_NODE_RANK", "1"},
                            {"PET_MASTER_ADDR", "tj-node-0-0.tj"},
                            {"PET_MASTER_PORT", "29400"}});
  Parsed p = run({kProg}, env);
  CHECK(p.config.rdzv.backend == cxxrun::rendezvous::Backend::static_tcp);
  CHECK(p.config.master_addr == "tj-node-0-0.tj");
  CHECK(p.config.master_port == 29400);
  CHECK(p.config.group_rank == 1);
  CHECK(p.config.nproc_per_node == 3);
  Env automatic = env;
  automatic["PET_NPROC_PER_NODE"] = "auto";
  automatic["CUDA_VISIBLE_DEVICES"] = "";  // no GPU: one worker per CPU, as torchrun
  p = run({kProg}, automatic);
  CHECK(p.config.nproc_per_node >= 1);
}
