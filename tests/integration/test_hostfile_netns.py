"""cxxrun --hostfile over real ssh: three hosts as network namespaces, each
with its own sshd (netns_hosts.py), the launcher in a fourth. One job across
them, its output streamed with host prefixes, a failing rank's code, a remote
agent killed, Ctrl-C, a dropped connection, unreachable hosts; after each,
nothing of the job runs in any host's namespace (its processes listed by
pid, only the listening sshd left). The rendezvous is the default one: c10d
on the first host's port 29400, inside its namespace."""
import os
import signal
import subprocess
import time
import unittest

import netns_hosts
from harness import CXXRUN, TempDirTest, clean_env, read_pids, wait_for

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
