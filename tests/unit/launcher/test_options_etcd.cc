// --rdzv-backend=etcd-v3 (and torch's etcd, etcd-v2 names): the members of
// --rdzv-endpoint and the --rdzv-conf keys torch's etcd backends read.
#include "options_fixture.h"

using cxxrun::rendezvous::Backend;

TEST_CASE("etcd: every member of the endpoint list, port 2379 by default, torch's conf keys") {
  options_test::TempDir dir;
  const std::string ca = dir.file("ca.pem", "x", 0644), cert = dir.file("c.pem", "x", 0644),
                    key = dir.file("k.pem", "x", 0600);
  Parsed p = run({"--rdzv-backend=etcd-v3", "--rdzv-endpoint=e1:2379,e2,[::1]:23790", "--rdzv-id=j", "--nnodes=2:4",
                  "--rdzv-conf=protocol=https,cacert=" + ca + ",cert=" + cert + ",key=" + key +
                      ",etcd_prefix=/jobs/ours",
                  kProg});
  const auto& c = p.config;
  CHECK(c.rdzv.backend == Backend::etcd);
  CHECK(c.rdzv.name == "etcd-v3");
  const auto& e = c.rdzv.settings.etcd;
  CHECK(e.endpoints == std::vector<cxxrun::rendezvous::EtcdEndpoint>{{"e1", 2379}, {"e2", 2379}, {"::1", 23790}});
  CHECK(e.https);
  CHECK(e.cacert == ca);
  CHECK(e.cert == cert);
  CHECK(e.key == key);
  CHECK(e.prefix == "/jobs/ours");
  CHECK(c.rdzv.settings.endpoint == "https://e1:2379,e2:2379,[::1]:23790");
  CHECK(c.rdzv.settings.min_nodes == 2);
  CHECK(c.rdzv.settings.max_nodes == 4);
  CHECK(c.run_id == "j");
  CHECK(p.notes.empty());
  CHECK(c.use_agent_store);  // rank 0's agent serves the workers' store

  // torch's names run on the same backend, saying so once.
  for (const char* name : {"etcd", "etcd-v2"}) {
    Parsed t = run({std::string("--rdzv-backend=") + name, "--rdzv-endpoint=e1", kProg});
    CHECK(t.config.rdzv.backend == Backend::etcd);
    CHECK(t.config.rdzv.settings.etcd.prefix == "/torchelastic/p2p");
    CHECK_FALSE(t.config.rdzv.settings.etcd.https);
    REQUIRE(t.notes.size() == 1);
    CHECK_THAT(t.notes.front(), Contains(std::string("--rdzv-backend=") + name + " runs on cxxrun's etcd-v3 backend"));
  }
}

TEST_CASE("etcd: bad members, files and keys are one clear line") {
  CHECK_THAT(refusal({"--rdzv-backend=etcd-v3"}), Contains("needs --rdzv-endpoint=HOST[:PORT][,HOST[:PORT]...]"));
  CHECK_THAT(refusal({"--rdzv-backend=etcd-v3", "--rdzv-endpoint=e1,,e2"}), Contains("an empty member"));
  CHECK_THAT(refusal({"--rdzv-backend=etcd-v3", "--rdzv-endpoint=e1:99999"}), Contains("e1:99999"));
  CHECK_THAT(refusal({"--rdzv-backend=etcd-v3", "--rdzv-endpoint=e1", "--rdzv-conf=protocol=grpc"}),
             Contains("protocol=grpc: must be http or https"));
  CHECK_THAT(refusal({"--rdzv-backend=etcd-v3", "--rdzv-endpoint=e1", "--rdzv-conf=cacert=/no/such.pem"}),
             Contains("cacert=/no/such.pem: cannot read the file"));
  CHECK_THAT(refusal({"--rdzv-backend=etcd-v3", "--rdzv-endpoint=e1", "--rdzv-conf=etcd_prefix=rel"}),
             Contains("must start with '/'"));
  options_test::TempDir dir;
  const std::string cert = dir.file("c.pem", "x", 0644);
  CHECK_THAT(refusal({"--rdzv-backend=etcd-v3", "--rdzv-endpoint=e1", "--rdzv-conf=cert=" + cert}),
             Contains("cert and key go together"));
  // The etcd keys mean nothing to the other backends, and the c10d store's
  // token means nothing to etcd.
  CHECK_THAT(refusal({"--rdzv-backend=c10d", "--rdzv-endpoint=h", "--rdzv-conf=protocol=https"}),
             Contains("protocol is read by the etcd backends only"));
  for (const char* text : {"secret\n", ":pw\n", "alice:\n"}) {
    const std::string token = dir.file("token", text, 0600);
    CHECK_THAT(refusal({"--rdzv-backend=etcd-v3", "--rdzv-endpoint=e1", "--rdzv-conf=token_file=" + token}),
               Contains("with etcd, token_file holds an etcd user's credentials as NAME:PASSWORD"));
  }
}

TEST_CASE("etcd: token_file holds an etcd user's NAME:PASSWORD") {
  options_test::TempDir dir;
  const std::string token = dir.file("token", "alice:pa:ss\n", 0600);
  Parsed p = run({"--rdzv-backend=etcd-v3", "--rdzv-endpoint=e1", "--rdzv-conf=token_file=" + token, kProg});
  const auto& s = p.config.rdzv.settings;
  CHECK(s.etcd.username == "alice");
  CHECK(s.etcd.password == "pa:ss");  // a password may hold ':'; a name may not, as with etcdctl --user
  CHECK(s.token.empty());             // not a c10d store secret
}
