"""cxxrun --hostfile over real ssh: three hosts as network namespaces, each
with its own sshd (netns_hosts.py), the launcher in a fourth. One job across
them, its output streamed with host prefixes, a failing rank's code, a remote
agent killed, Ctrl-C, a dropped connection, unreachable hosts, cxxrunctl
against the job with and without its token; after each, nothing of the job
runs in any host's namespace (its processes listed by pid, only the
listening sshd left). The rendezvous is the default one: c10d on the first
host's port 29400, inside its namespace."""
import json
import os
import re
import signal
import stat
import subprocess
import sys
import time
import unittest

import netns_hosts
from harness import CXXRUN, TempDirTest, alive, clean_env, read_pids, wait_for
from test_cxxrunctl import CXXRUNCTL, group_line_ranks

WHY_NOT = netns_hosts.missing()


@unittest.skipIf(WHY_NOT is not None, WHY_NOT or "")
class OverSsh(TempDirTest):
    def setUp(self):
        super().setUp()
        os.chmod(self.dir, 0o755)  # the remote hosts' workers write here
        self.hosts = netns_hosts.Hosts(self.dir)
        self.addCleanup(self.hosts.close)

    def hostfile(self, lines):
        path = os.path.join(self.dir, "hostfile")
        with open(path, "w") as f:
            f.write("# three namespaces\n\n" + "".join(line + "\n" for line in lines))
        return path

    def argv(self, *args, hostfile=None):
        hostfile = hostfile or self.hostfile([f"{ip} slots=2" for ip in self.hosts.ips])
        return self.hosts.in_launcher_ns([CXXRUN, f"--hostfile={hostfile}", f"--rsh={self.hosts.rsh}", *args])

    def launch(self, *args, timeout=120, **kw):
        p = subprocess.run(self.argv(*args, **kw), env=clean_env(), capture_output=True, text=True, timeout=timeout,
                           stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr

    def start(self, *args, **kw):
        p = subprocess.Popen(self.argv(*args, **kw), env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, stdin=subprocess.DEVNULL)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.communicate()))
        return p

    def sleeper(self):
        return self.script("sleeper.sh", f"echo $$ > {self.dir}/pid.$RANK\necho $PPID > {self.dir}/agent.$RANK\n"
                                         "exec sleep 120\n")

    def assert_nothing_left(self, timeout=30):
        for i in range(3):
            wait_for(lambda: not self.hosts.left_behind(i), timeout, f"host {i}'s namespace to hold only sshd")

    def test_one_command_runs_the_job_on_every_host(self):
        worker = self.script("w.sh", f"""set -- $SSH_CONNECTION
printf '%s %s %s\\n' "$(readlink /proc/self/ns/net)" "$3" "$LOCAL_RANK" > {self.dir}/where.$RANK
echo "rank $RANK says hello"
""")
        rc, out, err = self.launch("--no-python", worker)
        self.assertEqual(rc, 0, err)
        where = {}
        for name in os.listdir(self.dir):
            if name.startswith("where."):
                with open(os.path.join(self.dir, name)) as f:
                    where[int(name.split(".")[1])] = f.read().split()
        self.assertEqual(sorted(where), list(range(6)))
        # Two workers on each host, each inside that host's namespace, reached
        # by ssh at that host's address.
        for i, ip in enumerate(self.hosts.ips):
            ns = self.hosts.net_ns_id(i)
            here = [w for w in where.values() if w[0] == ns]
            self.assertEqual(len(here), 2, where)
            self.assertEqual({w[1] for w in here}, {ip})
            self.assertEqual(sorted(w[2] for w in here), ["0", "1"])
            self.assertEqual(sum(line.startswith(f"[{ip}] ") and "says hello" in line for line in out.splitlines()), 2)
        self.assertIn(f"rendezvous at {self.hosts.ips[0]}:29400", err)
        self.assert_nothing_left()

    def test_a_failing_rank_ends_the_job_with_its_code(self):
        worker = self.script("fail.sh", '[ "$RANK" = 3 ] && { echo "rank 3 fails" >&2; exit 5; }\nsleep 30\n')
        rc, out, err = self.launch("--no-python", worker)
        self.assertEqual(rc, 5, err)
        self.assertRegex(err, r"\[10\.213\.44\.\d\] .*rank 3 fails")
        self.assert_nothing_left()

    def test_a_killed_agent_ends_the_job_as_the_contract_says(self):
        p = self.start("--no-python", self.sleeper())
        wait_for(lambda: len(read_pids(self.dir, "pid.")) == 6, 60, "six workers")
        with open(f"{self.dir}/agent.2") as f:  # rank 2: the second host by address
            agent = int(f.read())
        host = next(i for i in range(3) if agent in self.hosts.pids(i))
        os.kill(agent, signal.SIGKILL)
        out, err = p.communicate(timeout=120)
        # --nnodes=3 and no spare: too few nodes left, the rendezvous is lost.
        self.assertEqual(p.returncode, 244, err)
        self.assertIn(f"host {self.hosts.ips[host]}: lost its agent", err)
        self.assert_nothing_left()

    def test_ctrl_c_leaves_no_process_on_any_host(self):
        p = self.start("--no-python", self.sleeper())
        wait_for(lambda: len(read_pids(self.dir, "pid.")) == 6, 60, "six workers")
        for i in range(3):
            self.assertGreater(len(self.hosts.left_behind(i)), 2)  # its agent and workers run there
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=90)
        self.assertEqual(p.returncode, 130, err)
        self.assertEqual(err.count("the launcher forwards SIGINT"), 3, err)
        self.assert_nothing_left()

    def test_a_dropped_connection_stops_that_hosts_workers(self):
        p = self.start("--no-python", self.sleeper())
        wait_for(lambda: len(read_pids(self.dir, "pid.")) == 6, 60, "six workers")
        ip = self.hosts.ips[1]
        ssh = [pid for pid in self.hosts_children(p.pid) if ip in self.cmdline(pid)]
        self.assertEqual(len(ssh), 1)
        os.kill(ssh[0], signal.SIGKILL)
        wait_for(lambda: not self.hosts.left_behind(1), 60, "the dropped host's agent and workers to end")
        out, err = p.communicate(timeout=120)
        self.assertNotEqual(p.returncode, 0, err)
        self.assertIn(f"host {ip}: lost its agent", err)
        self.assert_nothing_left()

    def test_unreachable_hosts_are_one_line_each(self):
        # The launcher's own address runs no sshd: refused at once.
        down = self.hosts.launcher_ip
        hostfile = self.hostfile([self.hosts.ips[0], self.hosts.ips[1], down])
        rc, out, err = self.launch("--no-python", "/bin/true", hostfile=hostfile)
        self.assertEqual(rc, 1, err)
        lines = [line for line in err.splitlines() if down in line]
        self.assertEqual(len(lines), 1, err)
        self.assertRegex(lines[0], rf"^cxxrun: host {down} unreachable: 'ssh .* {down} {CXXRUN} \.\.\.' exited 255: "
                                   rf"ssh: connect to host {down} port 22: Connection refused")
        self.assert_nothing_left()
        hostfile = self.hostfile([self.hosts.ips[0], "no-such-host.invalid"])
        rc, out, err = self.launch("--no-python", "/bin/true", hostfile=hostfile)
        self.assertEqual(rc, 1, err)
        lines = [line for line in err.splitlines() if "no-such-host.invalid" in line]
        self.assertEqual(len(lines), 1, err)
        self.assertIn("Could not resolve hostname", lines[0])
        self.assert_nothing_left()

    def ctl(self, *args, timeout=60):
        """cxxrunctl from the launcher's namespace, where a user of the job would run it."""
        p = subprocess.run(self.hosts.in_launcher_ns([CXXRUNCTL, *args]), env=clean_env(), capture_output=True,
                           text=True, timeout=timeout, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr

    def test_cxxrunctl_status_logs_stacks_and_stop_with_the_token_the_launcher_wrote(self):
        worker = os.path.join(self.dir, "ctl_worker.py")
        with open(worker, "w") as f:
            f.write(f"""import os, time
with open("{self.dir}/pid." + os.environ["RANK"], "w") as f:
    f.write(str(os.getpid()))
def netns_rank_waits_here():
    for tick in range(600):
        print("rank", os.environ["RANK"], "tick", tick, flush=True)
        time.sleep(0.2)
netns_rank_waits_here()
""")
        token = os.path.join(self.dir, "job.token")
        p = self.start(f"--token-out={token}", "--rdzv-id=netnsctl", worker)
        wait_for(lambda: len(read_pids(self.dir, "pid.")) == 6, 90, "six workers")
        pids = sorted(read_pids(self.dir, "pid."))
        self.assertEqual(stat.S_IMODE(os.stat(token).st_mode), 0o600)
        job = [f"--rdzv-endpoint={self.hosts.ips[0]}:29400", "--rdzv-id=netnsctl"]
        with_token = ["--token-file", token, *job]

        def board():
            rc, out, _ = self.ctl("status", "--json", *with_token, timeout=30)
            return json.loads(out) if rc == 0 else None
        wait_for(lambda: (board() or {}).get("nodes") and
                 sorted(r["pid"] for n in board()["nodes"] for r in n["ranks"] if r["state"] == "running") == pids,
                 60, "every rank running on the board")
        doc = board()
        self.assertEqual(len(doc["nodes"]), 3)
        self.assertEqual({n["phase"] for n in doc["nodes"]}, {"running"})

        rc, out, err = self.ctl("status", *with_token)
        self.assertEqual(rc, 0, err)
        self.assertIn("job netnsctl: 3 nodes, 6 ranks", out)

        def ranks_in_logs():
            rc, out, _ = self.ctl("logs", *with_token, timeout=30)
            return rc == 0 and {int(m) for m in re.findall(r"^\[rank(\d+)\]: rank \d+ tick", out, re.M)} == set(range(6))
        wait_for(ranks_in_logs, 30, "every rank's lines in logs")

        rc, out, err = self.ctl("stacks", *with_token)
        self.assertEqual(rc, 0, err)
        headers = dict(re.findall(r"^rank (\d+) pid=(\d+) host=\S+ node=\S+: waits in netns_rank_waits_here "
                                  r"at ctl_worker\.py:\d+$", out, re.M))
        self.assertEqual(sorted(int(r) for r in headers), list(range(6)), out)
        self.assertEqual(sorted(int(pid) for pid in headers.values()), pids, out)
        grouped = group_line_ranks(out.strip().splitlines()[-1])
        self.assertEqual(sorted(grouped), list(range(6)), out)
        rc, out, err = self.ctl("stacks", "--rank", "4", *with_token)
        self.assertEqual(rc, 0, err)
        self.assertEqual(re.findall(r"^rank (\d+) pid=", out, re.M), ["4"], out)

        # Without the token, or with a wrong one: refused, nothing printed, nothing stopped.
        wrong = os.path.join(self.dir, "wrong.token")
        with open(wrong, "w") as f:
            f.write("0" * 64 + "\n")
        os.chmod(wrong, 0o600)
        for who in ([], ["--token-file", wrong]):
            for command in (["status"], ["logs"], ["stacks"], ["stop"]):
                rc, out, err = self.ctl(*command, *who, *job)
                self.assertEqual(rc, 4, (command, who, err))
                self.assertEqual(out, "", command)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
        time.sleep(3)  # past an agent's next look at the board for a stop request
        self.assertIsNone(p.poll())
        self.assertTrue(all(alive(pid) for pid in pids))
        self.assertEqual(sorted(read_pids(self.dir, "pid.")), pids)  # no restart
        self.assertEqual({n["phase"] for n in board()["nodes"]}, {"running"})

        rc, out, err = self.ctl("stop", *with_token)
        self.assertEqual(rc, 0, err)
        self.assertIn("asked the 3 nodes of job netnsctl to stop", out)
        out, err = p.communicate(timeout=120)
        self.assertEqual(p.returncode, 143, err)  # every agent's 143: the job's (docs/exit-codes.md)
        self.assertEqual(err.count("cxxrunctl stop (cxxrunctl on"), 3, err)
        self.assert_nothing_left()

    def test_token_out_is_refused_where_the_launch_makes_no_token(self):
        mine = os.path.join(self.dir, "mine.token")
        with open(mine, "w") as f:
            f.write("x\n")
        os.chmod(mine, 0o600)
        out_file = os.path.join(self.dir, "out.token")
        cases = [
            ([f"--rdzv-conf=token_file={mine}"], "the job's token is your token_file's"),
            (["--rdzv-backend=etcd-v3", "--rdzv-endpoint=127.0.0.1:2379"], "an etcd job's store is etcd"),
            (["--rdzv-endpoint=127.0.0.9:29400"], "the store at 127.0.0.9:29400 is none of the hosts'"),
        ]
        for extra, words in cases:
            rc, out, err = self.launch(f"--token-out={out_file}", *extra, "--no-python", "/bin/true")
            self.assertEqual(rc, 2, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn(f"--token-out={out_file}: this launch makes no token to write: {words}", err)
        # An agent run by hand makes no token either.
        p = subprocess.run([CXXRUN, f"--token-out={out_file}", "--no-python", "/bin/true"], env=clean_env(),
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertIn(f"--token-out={out_file}: only with --hostfile or --hosts", p.stderr)
        self.assertFalse(os.path.exists(out_file))
        self.assert_nothing_left()

    @staticmethod
    def cmdline(pid):
        try:
            with open(f"/proc/{pid}/cmdline") as f:
                return f.read().replace("\0", " ")
        except OSError:
            return ""

    @staticmethod
    def hosts_children(pid):
        out = subprocess.run(["pgrep", "-P", str(pid)], capture_output=True, text=True).stdout
        return [int(p) for p in out.split()]
