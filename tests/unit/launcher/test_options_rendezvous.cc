// How the launcher fills agent::Config::rdzv for --standalone, static and c10d.
#include "options_fixture.h"

using cxxrun::rendezvous::Backend;
using namespace std::chrono_literals;

namespace {

Parsed c10d_run(std::vector<std::string> extra, const Env& env = base_env()) {
  std::vector<std::string> args{"--rdzv-backend=c10d"};
  args.insert(args.end(), extra.begin(), extra.end());
  args.push_back(kProg);
  return run(args, env);
}

}  // namespace

TEST_CASE("c10d: endpoint with port 29400 by default, node range and settings") {
  Parsed p = c10d_run({"--rdzv-endpoint=node-17.cluster", "--rdzv-id=job7", "--nnodes=2:4",
                       "--nproc-per-node=3"});
  const auto& c = p.config;
  const auto& s = c.rdzv.settings;
  CHECK(c.rdzv.backend == Backend::c10d);
  CHECK(c.rdzv.host == "node-17.cluster");
  CHECK(c.rdzv.port == 29400);
  CHECK_FALSE(c.rdzv.is_host.has_value());
  CHECK(c.run_id == "job7");
  CHECK(s.run_id == "job7");
  CHECK(s.endpoint == "node-17.cluster:29400");
  CHECK(s.min_nodes == 2);
  CHECK(s.max_nodes == 4);
  CHECK(s.local_world_size == 3);
  CHECK(s.entrypoint == kProg);
  CHECK(s.local_addr.empty());
  CHECK(s.join_timeout == 600s);  // torchrun's defaults when --rdzv-conf is empty
  CHECK(s.last_call_timeout == 30s);
  // The rendezvous decides these; the agent fills them in. Rank 0's agent
  // serves the workers' store.
  CHECK(c.use_agent_store);
  CHECK(c.group_rank == 0);
  CHECK(c.group_world_size == 1);
  CHECK(c.master_addr.empty());
  CHECK(c.master_port == 0);
  // --master-addr is the static backend's; nothing to warn about when c10d has its endpoint.
  for (const std::string& w : p.warnings) CHECK_THAT(w, !Contains("master_addr"));

  p = c10d_run({"--rdzv-endpoint=10.1.2.3:1234"});
  CHECK(p.config.rdzv.host == "10.1.2.3");
  CHECK(p.config.rdzv.port == 1234);
  CHECK(p.config.run_id == "none");
  p = c10d_run({"--rdzv-endpoint=[fe80::1]:29401"});
  CHECK(p.config.rdzv.host == "fe80::1");
  CHECK(p.config.rdzv.settings.endpoint == "[fe80::1]:29401");
}

TEST_CASE("c10d: a single node is still a c10d rendezvous") {
  Parsed p = c10d_run({"--rdzv-endpoint=localhost:29400"});
  CHECK(p.config.rdzv.backend == Backend::c10d);
  CHECK(p.config.rdzv.settings.min_nodes == 1);
  CHECK(p.config.rdzv.settings.max_nodes == 1);

  // localhost:0 (what --standalone expands to) gets a port that is free now.
  p = c10d_run({"--rdzv-endpoint=localhost:0", "--rdzv-id=job7"});
  CHECK(p.config.rdzv.backend == Backend::c10d);
  CHECK(p.config.rdzv.port > 0);
  CHECK(p.config.run_id == "job7");
  CHECK_THAT(failure({"--rdzv-backend=c10d", "--rdzv-endpoint=localhost:0", "--nnodes=2", kProg}).message,
             Contains("--rdzv-endpoint=localhost:0: port 0 only works for one node"));
  CHECK_THAT(failure({"--rdzv-backend=c10d", "--rdzv-endpoint=node-17.cluster:0", kProg}).message,
             Contains("port 0"));

  Env env = base_env();
  env["PET_RDZV_BACKEND"] = "c10d";
  env["PET_RDZV_ENDPOINT"] = "node-3:5000";
  env["PET_NNODES"] = "3";
  p = run({kProg}, env);
  CHECK(p.config.rdzv.backend == Backend::c10d);
  CHECK(p.config.rdzv.host == "node-3");
  CHECK(p.config.rdzv.port == 5000);
  CHECK(p.config.rdzv.settings.min_nodes == 3);
}

TEST_CASE("c10d: --rdzv-conf timeouts, is_host and --local-addr") {
  Parsed p = c10d_run({"--rdzv-endpoint=node-17", "--local-addr=10.0.0.7",
                       "--rdzv-conf=join_timeout=20, last_call_timeout=2.5,close_timeout=7,"
                       "keep_alive_interval=3,keep_alive_max_attempt=5,read_timeout=9,is_host=false"});
  const auto& r = p.config.rdzv;
  CHECK(r.settings.join_timeout == 20s);
  CHECK(r.settings.last_call_timeout == 2500ms);
  CHECK(r.settings.close_timeout == 7s);
  CHECK(r.settings.keep_alive_interval == 3s);
  CHECK(r.settings.keep_alive_max_attempt == 5);
  CHECK(r.settings.read_timeout == 9s);
  CHECK(r.settings.local_addr == "10.0.0.7");
  REQUIRE(r.is_host.has_value());
  CHECK_FALSE(*r.is_host);

  p = c10d_run({"--rdzv-endpoint=node-17", "--rdzv_conf=is_host=True"});
  REQUIRE(p.config.rdzv.is_host.has_value());
  CHECK(*p.config.rdzv.is_host);
  Env env = base_env();
  env["PET_RDZV_CONF"] = "is_host=0";
  env["PET_LOCAL_ADDR"] = "node-17-ib";
  p = c10d_run({"--rdzv-endpoint=node-17"}, env);
  CHECK(p.config.rdzv.is_host == std::optional<bool>(false));
  CHECK(p.config.rdzv.settings.local_addr == "node-17-ib");
}

TEST_CASE("c10d: refused command lines name the value") {
  Failure f = failure({"--rdzv-backend=c10d", kProg});
  CHECK(f.message == "--rdzv-backend=c10d needs --rdzv-endpoint=HOST[:PORT]");
  CHECK_FALSE(f.not_built_yet);
  Env env = base_env();
  env["PET_RDZV_BACKEND"] = "c10d";
  CHECK(failure({kProg}, env).message == "PET_RDZV_BACKEND=c10d needs --rdzv-endpoint=HOST[:PORT]");

  auto message = [](std::vector<std::string> extra) {
    extra.insert(extra.begin(), "--rdzv-backend=c10d");
    extra.push_back(kProg);
    return failure(extra).message;
  };
  CHECK_THAT(message({"--rdzv-endpoint=node:99999"}), Contains("--rdzv-endpoint=node:99999"));
  CHECK_THAT(message({"--rdzv-endpoint=bad host:1"}), Contains("--rdzv-endpoint=bad host:1"));
  f = failure({"--rdzv-backend=c10d", "--rdzv-endpoint=n:1", "--rdzv-conf=foo=1", kProg});
  CHECK_THAT(f.message, Contains("--rdzv-conf foo=1: unknown key"));
  CHECK_THAT(message({"--rdzv-endpoint=n:1", "--rdzv-conf=join_timeout=-1"}), Contains("join_timeout=-1"));
  CHECK_THAT(message({"--rdzv-endpoint=n:1", "--rdzv-conf=keep_alive_max_attempt=x"}),
             Contains("keep_alive_max_attempt=x"));
  CHECK_THAT(message({"--rdzv-endpoint=n:1", "--rdzv-conf=is_host=maybe"}),
             Contains("--rdzv-conf=is_host=maybe: The rendezvous configuration option 'is_host'"));
  CHECK_THAT(message({"--rdzv-endpoint=n:1", "--rdzv-conf=store_type=file"}), Contains("only 'tcp'"));
  env = base_env();
  env["PET_RDZV_CONF"] = "bogus=2";
  CHECK_THAT(failure({"--rdzv-backend=c10d", "--rdzv-endpoint=n:1", kProg}, env).message,
             Contains("PET_RDZV_CONF=bogus=2: --rdzv-conf bogus=2: unknown key"));
}

TEST_CASE("c10d: token_file reads the rendezvous store's secret when the options are parsed") {
  TempDir dir;
  const std::string good = dir.file("token", "s3cret\n", 0600);
  Parsed p = c10d_run({"--rdzv-endpoint=n:1", "--rdzv-conf=join_timeout=5,token_file=" + good});
  CHECK(p.config.rdzv.settings.token == "s3cret");  // the trailing newline is the editor's
  CHECK(c10d_run({"--rdzv-endpoint=n:1"}).config.rdzv.settings.token.empty());

  auto message = [](const std::string& conf) {
    return failure({"--rdzv-backend=c10d", "--rdzv-endpoint=n:1", "--rdzv-conf=" + conf, kProg}).message;
  };
  CHECK(message("token_file=/nonexistent/t") ==
        "--rdzv-conf token_file=/nonexistent/t: cannot read the token file /nonexistent/t: No such file or "
        "directory");
  const std::string empty = dir.file("empty", "", 0600);
  CHECK(message("token_file=" + empty) ==
        "--rdzv-conf token_file=" + empty + ": the token file " + empty + " is empty");

  // Static across nodes: its store is the workers' too, and they have no token.
  Failure f = failure({"--nnodes=2", "--node-rank=1", "--master-addr=10.9.8.7", "--rdzv-conf=token_file=" + good,
                       kProg});
  CHECK_THAT(f.message, Contains("token_file needs --rdzv-backend=c10d"));
  // Static on one node: worker rank 0 hosts the same unprotected store.
  // Refused too, not ignored (it was, with exit 0).
  for (auto args : {std::vector<std::string>{"--nnodes=1", "--master-port=29511"},
                    std::vector<std::string>{"--master-port=29511"}, std::vector<std::string>{"--nnodes=1:1"}}) {
    args.push_back("--rdzv-conf=token_file=" + good);
    args.push_back(kProg);
    CHECK_THAT(failure(args).message, Contains("token_file needs --rdzv-backend=c10d"));
  }
  // --standalone has no rendezvous store: said, not refused.
  p = run({"--standalone", "--rdzv-conf=token_file=" + good, kProg});
  REQUIRE(p.warnings.size() == 1);
  CHECK_THAT(p.warnings[0], Contains("token_file has no effect"));
}

TEST_CASE("c10d: --node-rank is ignored, with a warning") {
  Parsed p = c10d_run({"--rdzv-endpoint=node-17", "--node-rank=3", "--nnodes=2"});
  CHECK(p.config.rdzv.backend == Backend::c10d);
  CHECK(p.config.group_rank == 0);
  REQUIRE(p.warnings.size() == 1);
  CHECK(p.warnings[0] == "--node-rank=3 is ignored: --node-rank is only used by the static backend");
  CHECK(c10d_run({"--rdzv-endpoint=node-17", "--node-rank=0"}).warnings.empty());
}

TEST_CASE("static: multiple nodes meet in node 0's agent store") {
  Parsed p = run({"--nnodes=3", "--node-rank=2", "--master-addr=10.9.8.7", "--master-port=1234",
                  "--nproc-per-node=4", "--rdzv-id=j", kProg});
  const auto& c = p.config;
  CHECK(c.rdzv.backend == Backend::static_tcp);
  CHECK(c.rdzv.host == "10.9.8.7");
  CHECK(c.rdzv.port == 1234);
  CHECK(c.rdzv.node_rank == 2);
  CHECK(c.rdzv.nnodes == 3);
  CHECK(c.group_rank == 2);
  CHECK(c.group_world_size == 3);
  CHECK(c.master_addr == "10.9.8.7");
  CHECK(c.master_port == 1234);
  CHECK(c.use_agent_store);
  CHECK(c.run_id == "j");
  CHECK(c.rdzv.settings.run_id == "j");
  CHECK(c.rdzv.settings.min_nodes == 3);
  CHECK(c.rdzv.settings.max_nodes == 3);
  CHECK(c.rdzv.settings.local_world_size == 4);
  CHECK(c.rdzv.settings.entrypoint == kProg);
  CHECK(c.rdzv.settings.endpoint == "10.9.8.7:1234");
  CHECK(c.rdzv.settings.static_timeout == 900s);

  p = run({"--nnodes=2", "--node-rank=1", "--rdzv-endpoint=[fd00::5]:4000", "--rdzv-conf=timeout=30",
           kProg});
  CHECK(p.config.rdzv.host == "fd00::5");
  CHECK(p.config.rdzv.port == 4000);
  CHECK(p.config.master_addr == "fd00::5");
  CHECK(p.config.rdzv.settings.static_timeout == 30s);

  // One node stays the local backend; its agent serves the store.
  p = run({"--nnodes=1", kProg});
  CHECK(p.config.rdzv.backend == Backend::local);
  CHECK(p.config.use_agent_store);
  CHECK(p.config.group_world_size == 1);
}

TEST_CASE("static: node rank range and a fixed node count") {
  Failure f = failure({"--nnodes=2", "--node-rank=5", kProg});
  CHECK(f.message == "--node-rank=5: must be in 0..1 with --nnodes=2 (node ranks run 0..NNODES-1)");
  CHECK_FALSE(f.not_built_yet);
  CHECK_THAT(failure({"--nnodes=3", "--node-rank=-1", kProg}).message, Contains("--node-rank=-1"));
  CHECK_THAT(failure({"--nnodes=3", "--node-rank=3", kProg}).message, Contains("0..2"));
  CHECK_THAT(failure({"--node-rank=1", kProg}).message, Contains("must be 0 with --nnodes=1:1"));

  f = failure({"--nnodes=1:2", kProg});
  CHECK(f.message == "static rendezvous needs a fixed --nnodes=N, got 1:2");
  CHECK_FALSE(f.not_built_yet);
  Env env = base_env();
  env["PET_NNODES"] = "2:4";
  CHECK_THAT(failure({kProg}, env).message, Contains("got PET_NNODES=2:4"));
  CHECK_NOTHROW(run({"--nnodes=2:2", "--node-rank=1", "--master-addr=10.9.8.7", kProg}));
}

TEST_CASE("static: only node 0 checks that a local master port is free") {
  Listener held;
  std::string port = "--master-port=" + std::to_string(held.port);
  Failure f = failure({"--nnodes=2", port, kProg});
  CHECK_THAT(f.message, Contains(port + ": port " + std::to_string(held.port) + " is already in use"));
  CHECK_THAT(f.message, !Contains("--standalone"));
  // Node 1 connects to that port: it should be taken, by node 0's agent.
  CHECK(run({"--nnodes=2", "--node-rank=1", port, kProg}).config.master_port == held.port);
}

TEST_CASE("standalone runs one node") {
  Failure f = failure({"--standalone", "--nnodes=2", kProg});
  CHECK(f.message == "--standalone runs a single node; drop --nnodes=2");
  CHECK_THAT(failure({"--standalone", "--nnodes=1:2", kProg}).message, Contains("drop --nnodes=1:2"));
  Env env = base_env();
  env["PET_STANDALONE"] = "1";
  env["PET_NNODES"] = "4";
  CHECK_THAT(failure({kProg}, env).message, Contains("drop PET_NNODES=4"));

  Parsed p = run({"--standalone", "--rdzv-backend=c10d", "--rdzv-conf=join_timeout=5", kProg});
  CHECK(p.config.rdzv.backend == Backend::local);
  CHECK(p.config.rdzv.name == "c10d");  // as torch's events name it
  CHECK(p.config.rdzv.settings.run_id == p.config.run_id);
  CHECK(p.config.use_agent_store);
  // The agent binds port 0 for the workers' store: no port is chosen early.
  CHECK(p.config.master_port == 0);
  CHECK(p.config.rdzv.port == 0);
  // torch's switch to let worker rank 0 host its own store: the agent picks
  // a port that is free then, as torch does (test_worker_store.cc).
  env.erase("PET_NNODES");
  env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1";
  Parsed own = run({"--standalone", kProg}, env);
  CHECK_FALSE(own.config.use_agent_store);
  CHECK(own.config.master_port == 0);
}

TEST_CASE("rdzv-conf is validated for every backend") {
  for (std::vector<std::string> args : {std::vector<std::string>{},
                                        {"--standalone"},
                                        {"--nnodes=2", "--master-addr=10.9.8.7"}}) {
    args.push_back("--rdzv-conf=nope=1");
    args.push_back(kProg);
    CHECK_THAT(failure(args).message, Contains("--rdzv-conf nope=1: unknown key"));
  }
  CHECK(run({"--rdzv-conf=join_timeout=5,timeout=7", kProg}).config.rdzv.settings.static_timeout == 7s);
}
