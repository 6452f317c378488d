// cxxrun --hostfile / --hosts: the host list, --rsh's words, the remote
// command the launcher builds, and the job's exit code from every agent's.
#include <sys/wait.h>

#include "launcher/fanout_options.h"
#include "launcher/hostfile.h"
#include "launcher/job_exit_code.h"
#include "launcher/launcher_link.h"
#include "launcher/shell_words.h"
#include "options_fixture.h"

using Kind = cxxrun::launcher::HostOutcome::Kind;

namespace {

std::string hostfile_error(const std::string& text) {
  try {
    parse_hostfile(text, "--hostfile=h.txt");
  } catch (const UsageError& e) {
    return e.what();
  }
  FAIL("accepted: " << text);
  return {};
}

FanoutPlan plan_of(std::vector<std::string> args, const Env& env = base_env()) {
  args.push_back(kProg);
  Parsed p = run(args, env);
  REQUIRE(p.fanout);
  return *p.fanout;
}

std::string word_after(const std::vector<std::string>& words, const std::string& prefix) {
  for (const std::string& w : words)
    if (w.starts_with(prefix)) return w.substr(prefix.size());
  return "<absent>";
}

}  // namespace

TEST_CASE("hostfile: DeepSpeed's and MPI's lines, comments and blanks") {
  auto hosts = parse_hostfile("# the job's hosts\n\nnode1 slots=4\nnode2:2   # MPI\n  alice@node3  \n",
                              "--hostfile=h.txt");
  REQUIRE(hosts.size() == 3);
  CHECK(hosts[0].login == "node1");
  CHECK(hosts[0].slots == 4);
  CHECK(hosts[1].name == "node2");
  CHECK(hosts[1].slots == 2);
  CHECK(hosts[2].login == "alice@node3");
  CHECK(hosts[2].name == "node3");
  CHECK_FALSE(hosts[2].slots);
}

TEST_CASE("hostfile: each refusal names the value and the rule") {
  CHECK_THAT(hostfile_error("# nothing\n\n"), Contains("--hostfile=h.txt: no hosts"));
  CHECK_THAT(hostfile_error("a\nb\na slots=2\n"), Contains("line 3: host 'a' is named again (first at --hostfile=h.txt line 1)"));
  CHECK_THAT(hostfile_error("a slots=0\n"), Contains("line 1: slots '0' must be a whole number from 1 to 4096"));
  CHECK_THAT(hostfile_error("a:x\n"), Contains("slots 'x'"));
  CHECK_THAT(hostfile_error("a slots=-1\n"), Contains("slots '-1'"));
  CHECK_THAT(hostfile_error("a slots=99999\n"), Contains("slots '99999'"));
  CHECK_THAT(hostfile_error("a max_slots=3\n"), Contains("'max_slots=3' is not slots=N"));
  CHECK_THAT(hostfile_error("a;reboot\n"), Contains("host 'a;reboot' has the character ';'"));
  CHECK_THAT(hostfile_error("-oProxyCommand=x\n"), Contains("a leading '-' (ssh would read an option)"));
  CHECK_THAT(hostfile_error("$(id)\n"), Contains("the character '$'"));
  CHECK_THAT(hostfile_error("@host\n"), Contains("an empty user before '@'"));
  CHECK_THAT(hostfile_error("a slots=1 slots=2\n"), Contains("given twice"));
  CHECK(hostfile_error("a;b\n").find('\n') == std::string::npos);
}

TEST_CASE("hosts list: h1,h2:N") {
  auto hosts = parse_hosts_list("h1, h2:3", "--hosts=h1, h2:3");
  REQUIRE(hosts.size() == 2);
  CHECK(hosts[1].slots == 3);
  CHECK_THROWS_WITH(parse_hosts_list("h1,,h2", "--hosts=h1,,h2"), Contains("an empty host between commas"));
  CHECK_THROWS_WITH(parse_hosts_list("h1,h1:2", "--hosts=h1,h1:2"), Contains("named again"));
  CHECK_THROWS_WITH(parse_hosts_list("", "--hosts="), Contains("--hosts=: no hosts"));
}

TEST_CASE("shell words: quoted words come back whole through sh -c") {
  const std::vector<std::string> words = {"plain", "two words", "it's", "$HOME", "a;b", "`id`", "\"q\"", "", "x\ny",
                                          "back\\slash", "*", "--flag=a b"};
  for (const std::string& w : words) CHECK(split_shell_words(shell_quote(w)) == std::vector<std::string>{w});
  CHECK(shell_quote("plain/path-1.0") == "plain/path-1.0");
  // A real shell reads them the same way.
  TempDir dir;
  const std::string out = (dir.path / "out").string();
  const std::string script = "for a in " + shell_command(words) + "; do printf '%s\\0' \"$a\"; done > " + out;
  const int status = std::system(("sh -c " + shell_quote(script)).c_str());
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  std::ifstream in(out);
  std::vector<std::string> got;
  for (std::string w; std::getline(in, w, '\0');) got.push_back(w);
  CHECK(got == words);
}

TEST_CASE("shell words: --rsh splits as a shell would") {
  CHECK(split_shell_words("ssh -o BatchMode=yes") == std::vector<std::string>{"ssh", "-o", "BatchMode=yes"});
  CHECK(split_shell_words("ssh -i '/my keys/id' -o \"ProxyJump=a b\" x\\ y") ==
        std::vector<std::string>{"ssh", "-i", "/my keys/id", "-o", "ProxyJump=a b", "x y"});
  CHECK_THROWS_WITH(split_shell_words("ssh 'x"), Contains("unterminated '"));
  CHECK_THROWS_WITH(split_shell_words("ssh \"x"), Contains("unterminated \""));
  CHECK_THROWS_WITH(split_shell_words("ssh x\\"), Contains("trailing backslash"));
}

TEST_CASE("fanout plan: one remote cxxrun per host, told everything on its command line") {
  Env env = base_env();
  env["PET_MAX_RESTARTS"] = "2";
  auto plan = plan_of({"--hosts=n1:4,n2,n3", "--remote-cxxrun=/opt/cxxrun", "--no-python", "--section-timeout=a=1",
                       "--section-timeout=b=2", "--", "x"},
                      env);
  REQUIRE(plan.commands.size() == 3);
  const auto& first = plan.commands[0];
  CHECK(first[0] == "/opt/cxxrun");
  CHECK(first[1] == "--from-launcher");
  CHECK(word_after(first, "--nnodes=") == "3");
  CHECK(word_after(first, "--rdzv-backend=") == "c10d");
  CHECK(word_after(first, "--rdzv-endpoint=") == "n1:29400");
  CHECK(word_after(first, "--rdzv-id=") == plan.run_id);
  CHECK(word_after(first, "--rdzv-conf=") == "is_host=true");
  CHECK(word_after(plan.commands[1], "--rdzv-conf=") == "is_host=false");
  CHECK(word_after(first, "--nproc-per-node=") == "4");
  CHECK(word_after(plan.commands[1], "--nproc-per-node=") == "<absent>");
  CHECK(word_after(first, "--max-restarts=") == "2");  // PET_MAX_RESTARTS, written out
  CHECK(std::count(first.begin(), first.end(), "--section-timeout=a=1") == 1);
  CHECK(std::count(first.begin(), first.end(), "--no-python") == 1);
  // The program after "--", as given.
  CHECK(first[first.size() - 3] == "--");
  CHECK(first[first.size() - 2] == "x");
  CHECK(first.back() == kProg);
  CHECK(plan.token.size() == 64);
  CHECK(plan.first_host_is_store);
  CHECK(plan.min_nodes == 3);
  CHECK(plan.max_nodes == 3);
  // The token is never on a command line.
  for (const auto& words : plan.commands)
    for (const auto& w : words) CHECK(w.find(plan.token) == std::string::npos);
  // A fresh token and run id per launch.
  auto again = plan_of({"--hosts=n1,n2", "x"});
  CHECK(again.token != plan.token);
  CHECK(again.run_id != plan.run_id);
  // rsh_argv: CMD HOST COMMAND..., each word quoted for the remote shell.
  auto argv = rsh_argv(plan, 1);
  CHECK(argv[0] == "ssh");
  CHECK(argv[1] == "-o");
  CHECK(argv[2] == "BatchMode=yes");
  CHECK(argv[3] == "n2");
  CHECK(argv[4] == "/opt/cxxrun");
}

TEST_CASE("fanout plan: --nnodes, --nproc-per-node, the endpoint and the token") {
  auto spare = plan_of({"--hosts=a,b,c", "--nnodes=1:2"});
  CHECK(spare.min_nodes == 1);
  CHECK(spare.max_nodes == 2);
  CHECK(word_after(spare.commands[2], "--nnodes=") == "1:2");
  auto given = plan_of({"--hosts=a:4,b:2", "--nproc-per-node=8"});
  CHECK(word_after(given.commands[1], "--nproc-per-node=") == "8");
  auto endpoint = plan_of({"--hosts=a,b", "--rdzv-endpoint=b:1234", "--rdzv-id=job7", "--rdzv-conf=read_timeout=5"});
  CHECK_FALSE(endpoint.first_host_is_store);
  CHECK(endpoint.token.size() == 64);  // b's agent hosts it
  CHECK(word_after(endpoint.commands[0], "--rdzv-conf=") == "read_timeout=5");
  CHECK(word_after(endpoint.commands[0], "--rdzv-id=") == "job7");
  auto outside = plan_of({"--hosts=a,b", "--rdzv-endpoint=store.example:1234"});
  CHECK(outside.token.empty());
  auto etcd = plan_of({"--hosts=a,b", "--rdzv-backend=etcd-v3", "--rdzv-endpoint=e1:2379"});
  CHECK(etcd.token.empty());
  CHECK(word_after(etcd.commands[0], "--rdzv-backend=") == "etcd-v3");
  auto rsh = plan_of({"--hosts=a", "--rsh=ssh -i '/k dir/id' -p 2222"});
  CHECK(rsh.rsh == std::vector<std::string>{"ssh", "-i", "/k dir/id", "-p", "2222"});
}

TEST_CASE("fanout plan: PET_HOSTFILE and PET_HOSTS as fallbacks") {
  TempDir dir;
  const auto file = dir.path / "hosts";
  std::ofstream(file) << "x slots=2\ny slots=2\n";
  Env env = base_env();
  env["PET_HOSTFILE"] = file.string();
  auto plan = plan_of({}, env);
  REQUIRE(plan.hosts.size() == 2);
  CHECK(plan.hosts[1].name == "y");
  Env list = base_env();
  list["PET_HOSTS"] = "p,q,r";
  CHECK(plan_of({}, list).hosts.size() == 3);
  list["PET_HOSTS"] = "p,p";
  CHECK_THAT(refusal({}, list), Contains("PET_HOSTS=p,p (host 2): host 'p' is named again"));
}

TEST_CASE("fanout plan: what cannot be spread over hosts is refused") {
  TempDir dir;
  const auto empty = dir.path / "empty";
  std::ofstream(empty) << "# none\n";
  CHECK_THAT(refusal({"--hostfile=" + empty.string()}), Contains("no hosts"));
  CHECK_THAT(refusal({"--hostfile=/nonexistent/hosts"}), Contains("--hostfile=/nonexistent/hosts: cannot read it"));
  CHECK_THAT(refusal({"--hostfile=" + empty.string(), "--hosts=a"}), Contains("give the hosts one way"));
  CHECK_THAT(refusal({"--hosts=a,b", "--standalone"}), Contains("--standalone runs a single node"));
  CHECK_THAT(refusal({"--hosts=a,b", "--rdzv-backend=static"}), Contains("meet by c10d or etcd"));
  CHECK_THAT(refusal({"--hosts=a,b", "--nnodes=3"}), Contains("--nnodes=3: needs at least 3 nodes, and --hosts=a,b names 2 hosts"));
  CHECK_THAT(refusal({"--hosts=a,b", "--rsh=ssh 'x"}), Contains("--rsh=ssh 'x: an unterminated ' quote"));
  CHECK_THAT(refusal({"--hosts=a,b", "--rsh="}), Contains("no command"));
  CHECK_THAT(refusal({"--hosts=a", "--from-launcher"}), Contains("--from-launcher is the remote agents' own flag"));
  CHECK_THAT(failure({"--hosts=a,b"}).message, Contains("missing the training program"));
}

TEST_CASE("launcher link: a control line names one signal") {
  CHECK(control_line(SIGINT) == "SIGINT");
  CHECK(control_signal("SIGTERM") == SIGTERM);
  CHECK(control_signal("SIGKILL") == 0);  // the launcher never sends it: an agent is stopped, not killed
  CHECK(control_signal("") == 0);
}

TEST_CASE("job exit code: one code from every agent's, by the contract") {
  auto code = [](std::vector<HostOutcome> hosts, int sig = 0, bool unreachable = false) {
    return job_exit_code(hosts, sig, unreachable);
  };
  const HostOutcome ok{Kind::exited, 0}, lost{Kind::lost, 0}, gone{Kind::unreachable, 0};
  auto exited = [](int c) { return HostOutcome{Kind::exited, c}; };
  CHECK(code({ok, ok, ok}) == 0);
  CHECK(code({ok, exited(3), exited(3)}) == 3);
  CHECK(code({exited(3), exited(242), exited(1)}) == 242);
  CHECK(code({exited(242)}, SIGINT) == 242);                  // 242 wins over every other code
  CHECK(code({exited(130), exited(130)}, SIGINT) == 130);     // the launcher's signal
  CHECK(code({exited(143), ok}, 0, true) == 1);               // stopped: a host unreachable
  CHECK(code({exited(1), exited(2), exited(245)}) == 2);     // bad input first
  CHECK(code({exited(7), exited(245), exited(241)}) == 245);
  CHECK(code({exited(240), exited(241)}) == 241);
  CHECK(code({exited(244), exited(240)}) == 240);
  CHECK(code({exited(1), exited(244)}) == 244);
  CHECK(code({exited(1), exited(9), exited(7)}) == 9);        // the program's own, first host first
  CHECK(code({exited(1), ok}) == 1);                          // a spare released by a failed job
  CHECK(code({exited(243), ok, ok}) == 0);                    // a spare finished the job without it
  CHECK(code({lost, ok, ok}) == 0);
  CHECK(code({gone, ok}) == 0);
  CHECK(code({exited(243), lost}) == 243);
  CHECK(code({lost, exited(244)}) == 244);
  CHECK(code({lost, lost}) == 244);
  CHECK(code({gone, gone}) == 244);
}
