// cxxrunctl's command line (ctl/options.h): the job it names, with the
// PET_* fallbacks cxxrun reads, and one line for each bad value.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>

#include "ctl/options.h"
#include "temp_tree.h"

using namespace cxxrun::ctl;
using cxxrun::rendezvous::Backend;

namespace {

Getenv env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

Options parse_with(std::vector<std::string> args, std::map<std::string, std::string> vars = {}) {
  return parse(args, env_of(std::move(vars)));
}

std::string error_of(std::vector<std::string> args, std::map<std::string, std::string> vars = {}) {
  try {
    parse_with(std::move(args), std::move(vars));
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("ctl options: the command line names the job, c10d by default") {
  const Options o = parse_with({"--rdzv-endpoint=node1:1234", "--rdzv_id", "job7", "status", "--json"});
  CHECK(o.command == Command::status);
  CHECK(o.json);
  CHECK(o.rdzv.backend == Backend::c10d);
  CHECK(o.rdzv.host == "node1");
  CHECK(o.rdzv.port == 1234);
  CHECK(o.rdzv.settings.run_id == "job7");
  CHECK(o.rdzv.settings.token.empty());
}

TEST_CASE("ctl options: torchrun's defaults, and PET_* where the command line says nothing") {
  const Options o = parse_with({"top"}, {{"PET_RDZV_ENDPOINT", "10.0.0.1"}});
  CHECK(o.rdzv.port == 29400);
  CHECK(o.rdzv.settings.run_id == "none");
  const Options e = parse_with({"stop", "--rdzv-id=cli"}, {{"PET_RDZV_ENDPOINT", "h:1"}, {"PET_RDZV_ID", "env"},
                                                          {"PET_RDZV_CONF", "read_timeout=7"}});
  CHECK(e.rdzv.settings.run_id == "cli");  // the command line first
  CHECK(e.timeout == std::chrono::seconds(7));
}

TEST_CASE("ctl options: the token, from --token-file or --rdzv-conf token_file") {
  TempDir t;
  const std::string path = t.path + "/token";
  write_file(path, "s3cret\n");
  CHECK(parse_with({"status", "--rdzv-endpoint=h", "--token-file", path}).rdzv.settings.token == "s3cret");
  CHECK(parse_with({"status", "--rdzv-endpoint=h", "--rdzv-conf=token_file=" + path}).rdzv.settings.token ==
        "s3cret");
  CHECK(error_of({"status", "--rdzv-endpoint=h", "--token-file=" + path, "--rdzv-conf=token_file=" + path})
            .find("the token is given twice") != std::string::npos);
}

TEST_CASE("ctl options: etcd's members, and its token file as NAME:PASSWORD") {
  TempDir t;
  const std::string creds = t.path + "/creds";
  write_file(creds, "root:pw\n");
  const Options o =
      parse_with({"status", "--rdzv-backend=etcd", "--rdzv-endpoint=e1:2381,e2", "--token-file=" + creds});
  CHECK(o.rdzv.backend == Backend::etcd);
  REQUIRE(o.rdzv.settings.etcd.endpoints.size() == 2);
  CHECK(o.rdzv.settings.etcd.endpoints[1].port == 2379);
  CHECK(o.rdzv.settings.etcd.username == "root");
  CHECK(o.rdzv.settings.etcd.password == "pw");
  CHECK(o.rdzv.settings.token.empty());
  const std::string plain = t.path + "/plain";
  write_file(plain, "nocolon\n");
  CHECK(error_of({"status", "--rdzv-backend=etcd-v3", "--rdzv-endpoint=e1", "--token-file=" + plain})
            .find("NAME:PASSWORD") != std::string::npos);
}

TEST_CASE("ctl options: bad values, each named with its rule") {
  CHECK(error_of({"status"}).find("--rdzv-endpoint") != std::string::npos);
  CHECK(error_of({"status", "--rdzv-endpoint=h"}, {{"PET_RDZV_BACKEND", "static"}})
            .find("PET_RDZV_BACKEND=static: a job with the static rendezvous has no rendezvous store") !=
        std::string::npos);
  CHECK(error_of({"status", "--rdzv-endpoint=h", "--rdzv-id=a/b"}).find("--rdzv-id=a/b") != std::string::npos);
  CHECK(error_of({"status", "--rdzv-endpoint=h", "--interval=1"}).find("only top takes it") != std::string::npos);
  CHECK(error_of({"status", "stop", "--rdzv-endpoint=h"}).find("one command at a time") != std::string::npos);
  CHECK(error_of({"status", "--rdzv-endpoint=h", "--rdzv-conf"}).find("needs a value") != std::string::npos);
  CHECK(parse_with({"--help"}).command == Command::help);
}
