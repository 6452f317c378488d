"""cxxrun --hostfile / --hosts with a stand-in for ssh that runs each host's
command on this machine (as test_ssh_fanout.py's does): the remote command's
quoting, the token on stdin and nowhere else, host prefixes on the output,
the job's exit code from every agent's, an unreachable host, Ctrl-C, a
dropped connection, and bad host lists. Real sshd between network
namespaces: test_hostfile_netns.py."""
import contextlib
import os
import signal
import subprocess
import time

import unittest
import uuid

import etcd_cluster
from harness import CXXRUN, OrphanCheckTest, alive, clean_env, end, free_port, read_pids, wait_for

HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]

# rsh HOST COMMAND...: logs the host and the command, keeps the token line
# for the test, and runs the command here through a shell, as sshd would.
# Its stdin comes through `cat`, the stand-in for the connection: killing
# that cat is a dropped connection. FAKE_RSH_DOWN names a host it cannot
# reach, as ssh says it.
FAKE_RSH = """host=$1; shift
if [[ $host == "$FAKE_RSH_DOWN" ]]; then
  echo "ssh: connect to host $host port 22: Connection refused" >&2
  exit 255
fi
printf '%s\\t%s\\n' "$host" "$*" >> {dir}/rsh.log
IFS= read -r token
printf '%s' "$token" > {dir}/token.$host
exec 3< <(printf '%s\\n' "$token"; echo $BASHPID > {dir}/conn.$host; exec cat)
sh -c "$*" <&3 3<&-
rc=$?
# As ssh does, end when the command ends, whatever its stdin.
kill "$(cat {dir}/conn.$host)" 2>/dev/null
exit $rc
"""

WEIRD = ["two words", "it's", "$HOME", "a;b", "`id`", '"q"', "", "*"]


class Hostfile(OrphanCheckTest):
    def setUp(self):
        super().setUp()
        self.rsh = self.script("fake_rsh", FAKE_RSH.format(dir=self.dir))
        self.port = free_port()

    def argv(self, *args, hosts=",".join(HOSTS)):
        return [CXXRUN, f"--hosts={hosts}", f"--rsh={self.rsh}", f"--rdzv-endpoint=127.0.0.1:{self.port}",
                "--rdzv-conf=join_timeout=30", *args]

    def launch(self, *args, env=None, timeout=90, **kw):
        p = subprocess.run(self.argv(*args, **kw), env=env or clean_env(), capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr

    @contextlib.contextmanager
    def running(self, *args, env=None, **kw):
        """The launcher, started; on the way out (a failed wait, a timeout),
        killed and reaped if it still runs, so no test leaves one behind."""
        p = subprocess.Popen(self.argv(*args, **kw), env=env or clean_env(), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        try:
            yield p
        finally:
            end(p)

    def sleeper(self):
        # Each worker records its agent's pid and then its own, then sleeps:
        # the tests wait for the pid files, so the agent's must be there by
        # then (written second, it was missing once under load).
        return self.script("sleeper.sh", f"echo $PPID > {self.dir}/agent.$RANK\necho $$ > {self.dir}/pid.$RANK\n"
                                         f"exec sleep 60 {self.marker}\n")

    def test_one_job_across_the_hosts(self):
        worker = self.script("w.sh", f"""printf '%s\\0' "$@" > {self.dir}/args.$RANK
readlink /proc/self/fd/0 > {self.dir}/stdin.$RANK
tr '\\0' '\\n' < /proc/$PPID/cmdline > {self.dir}/cmdline.$RANK
tr '\\0' '\\n' < /proc/$PPID/environ > {self.dir}/environ.$RANK
echo "hello from rank $RANK"
""")
        rc, out, err = self.launch("--no-python", worker, *WEIRD,
                                   hosts="127.0.0.1:2,127.0.0.2,127.0.0.3")
        self.assertEqual(rc, 0, err)
        ranks = sorted(int(n.split(".")[1]) for n in os.listdir(self.dir) if n.startswith("args."))
        self.assertEqual(ranks, [0, 1, 2, 3])
        for r in ranks:
            with open(f"{self.dir}/args.{r}") as f:
                self.assertEqual(f.read().split("\0")[:-1], WEIRD)
            with open(f"{self.dir}/stdin.{r}") as f:
                self.assertEqual(f.read().strip(), "/dev/null")  # never the launcher's pipe
        # Each host's output with its prefix, never an unprefixed line.
        for line in out.splitlines():
            self.assertRegex(line, r"^\[127\.0\.0\.[123]\] ")
        self.assertEqual(sum("hello from rank" in line for line in out.splitlines()), 4)
        self.assertEqual(len([l for l in out.splitlines() if l.startswith("[127.0.0.1] ") and "hello" in l]), 2)
        self.assertIn("[127.0.0.2] ", err)
        self.assertNotIn("cxxrun-agent:", out + err)  # the launcher's own lines are not shown
        # The token: 64 hex digits, the same for every host, on stdin only.
        tokens = set()
        for host in HOSTS:
            with open(f"{self.dir}/token.{host}") as f:
                tokens.add(f.read())
        self.assertEqual(len(tokens), 1)
        token = tokens.pop()
        self.assertRegex(token, r"^[0-9a-f]{64}$")
        for r in ranks:
            for what in ("cmdline", "environ"):
                with open(f"{self.dir}/{what}.{r}") as f:
                    text = f.read()
                self.assertNotIn(token, text)
            with open(f"{self.dir}/cmdline.{r}") as f:
                self.assertIn("--from-launcher", f.read().split("\n"))
        with open(f"{self.dir}/rsh.log") as f:
            calls = [line.split("\t", 1) for line in f.read().splitlines()]
        self.assertEqual(sorted(h for h, _ in calls), HOSTS)
        for host, command in calls:
            self.assertEqual("--nproc-per-node=2" in command, host == "127.0.0.1")
            self.assertIn("--nnodes=3", command)

    def test_a_failing_rank_gives_the_job_its_code(self):
        worker = self.script("fail.sh", '[ "$RANK" = 1 ] && exit 7\nexit 0\n')
        rc, out, err = self.launch("--no-python", worker)
        self.assertEqual(rc, 7, err)
        self.assertIn("exiting with code 7", err)

    def test_a_remote_usage_error_is_the_jobs(self):
        rc, out, err = self.launch("--nproc-per-node=lots", "--no-python", "/bin/true", hosts="127.0.0.1,127.0.0.2")
        self.assertEqual(rc, 2, err)
        self.assertRegex(err, r"\[127\.0\.0\.2\] cxxrun: error: --nproc-per-node=lots")

    def test_an_unreachable_host_is_one_line_and_stops_the_job(self):
        sleeper = self.sleeper()
        rc, out, err = self.launch("--no-python", sleeper, env=clean_env(FAKE_RSH_DOWN="127.0.0.3"))
        self.assertEqual(rc, 1, err)
        lines = [l for l in err.splitlines() if "127.0.0.3" in l]
        self.assertEqual(len(lines), 1, err)
        self.assertIn(f"cxxrun: host 127.0.0.3 unreachable: '{self.rsh} 127.0.0.3 {CXXRUN} ...' exited 255: "
                      "ssh: connect to host 127.0.0.3 port 22: Connection refused", lines[0])
        self.assertIn("fewer than --nnodes' minimum 3: stopping the job on every host", err)

    def test_an_unreachable_host_above_the_minimum_leaves_the_job_going(self):
        worker = self.script("w.sh", f"echo $RANK > {self.dir}/ran.$RANK\n")
        rc, out, err = self.launch("--nnodes=2:3", "--rdzv-conf=join_timeout=30,last_call_timeout=1", "--no-python",
                                   worker, env=clean_env(FAKE_RSH_DOWN="127.0.0.3"))
        self.assertEqual(rc, 0, err)
        self.assertIn("the job goes on with the other 2 hosts", err)
        self.assertEqual(sorted(n for n in os.listdir(self.dir) if n.startswith("ran.")), ["ran.0", "ran.1"])

    def test_an_rsh_that_cannot_start(self):
        rc, out, err = self.launch("--no-python", "/bin/true", hosts="127.0.0.1,127.0.0.2")
        self.assertEqual(rc, 0, err)  # the control: this stand-in works
        p = subprocess.run([CXXRUN, "--hosts=127.0.0.1", "--rsh=/nonexistent/ssh -x", "--no-python", "/bin/true"],
                           env=clean_env(), capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 1, p.stderr)
        self.assertIn("cxxrun: host 127.0.0.1 unreachable: '/nonexistent/ssh -x 127.0.0.1 ", p.stderr)

    def test_ctrl_c_stops_every_host(self):
        sleeper = self.sleeper()
        with self.running("--nproc-per-node=2", "--no-python", sleeper) as p:
            wait_for(lambda: len(read_pids(self.dir, "pid.")) == 6, 60, "six workers")
            workers = read_pids(self.dir, "pid.")
            agents = set(read_pids(self.dir, "agent."))
            self.assertEqual(len(agents), 3)
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err)
        self.assertIn("received SIGINT: stopping the job on every host", err)
        self.assertEqual(err.count("the launcher forwards SIGINT"), 3, err)
        for pid in workers + list(agents):
            self.assertFalse(alive(pid), f"pid {pid} outlived the job")

    def stubborn(self):
        # Workers that ignore SIGTERM and SIGINT (and so does their sleep, which
        # inherits the ignored signals): only SIGKILL ends them.
        return self.script("stubborn.sh", f"trap '' TERM INT\necho $$ > {self.dir}/pid.$RANK\n"
                                          f"echo $PPID > {self.dir}/agent.$RANK\n"
                                          f"while :; do sleep 1 {self.marker}; done\n")

    def test_a_second_ctrl_c_kills_workers_that_ignore_sigterm(self):
        # A grace of 300 s: the first Ctrl-C alone would hold the job that
        # long; the second has every agent kill its workers now.
        with self.running("--no-python", "--shutdown-timeout=300", self.stubborn()) as p:
            wait_for(lambda: len(read_pids(self.dir, "pid.")) == 3, 60, "three workers")
            workers = read_pids(self.dir, "pid.")
            p.send_signal(signal.SIGINT)
            time.sleep(3)  # every agent has signalled its worker, which ignores it
            self.assertTrue(all(alive(pid) for pid in workers), "a worker ended on the first signal: not stubborn")
            self.assertIsNone(p.poll())
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=60)
        self.assertEqual(p.returncode, 130, err)
        for pid in workers:
            self.assertFalse(alive(pid), f"worker {pid} outlived the second Ctrl-C")

    def test_an_agent_that_does_not_stop_has_its_rsh_killed(self):
        # One agent is stopped (SIGSTOP): told to stop, it cannot. The
        # launcher waits --shutdown-timeout + --kill-timeout + 30 s for it,
        # then kills its rsh and ends; the others stop as usual.
        with self.running("--no-python", "--shutdown-timeout=1", "--kill-timeout=1", self.sleeper()) as p:
            frozen = None
            try:
                wait_for(lambda: len(read_pids(self.dir, "pid.")) == 3, 60, "three workers")
                frozen = sorted(set(read_pids(self.dir, "agent.")))[0]
                os.kill(frozen, signal.SIGSTOP)
                p.send_signal(signal.SIGTERM)
                out, err = p.communicate(timeout=120)
            finally:
                if frozen:
                    os.kill(frozen, signal.SIGCONT)
        self.assertEqual(p.returncode, 143, err)
        self.assertRegex(err, r"host \S+: its agent did not stop within 32 s of being told to; killing its --rsh")
        # Its rsh gone, the agent thawed reads end of file and stops its worker.
        wait_for(lambda: not alive(frozen), 60, "the thawed agent to end")

    def test_a_dropped_connection_stops_that_hosts_workers(self):
        sleeper = self.sleeper()
        with self.running("--no-python", sleeper) as p:
            wait_for(lambda: len(read_pids(self.dir, "pid.")) == 3, 60, "three workers")
            with open(f"{self.dir}/conn.127.0.0.2") as f:
                conn = int(f.read())
            agent_of = {}
            for r in range(3):
                with open(f"{self.dir}/agent.{r}") as f:
                    agent_of[r] = int(f.read())
            os.kill(conn, signal.SIGKILL)
            out, err = p.communicate(timeout=90)
        self.assertIn("[127.0.0.2] ", err)
        self.assertIn("the launcher's connection closed (stdin ended): stopping this node's workers", err)
        self.assertNotEqual(p.returncode, 0, err)
        for pid in read_pids(self.dir, "pid.") + list(agent_of.values()):
            self.assertFalse(alive(pid), f"pid {pid} outlived the job")


@unittest.skipIf(etcd_cluster.unavailable(), etcd_cluster.unavailable())
class HostfileOverEtcd(OrphanCheckTest):
    """The same one command with etcd as the rendezvous: every host's agent
    meets through the etcd cluster, and the job ends with its code."""

    def setUp(self):
        super().setUp()
        self.rsh = self.script("fake_rsh", FAKE_RSH.format(dir=self.dir))
        self.cluster = etcd_cluster.EtcdCluster(1)
        self.cluster.start()
        self.addCleanup(self.cluster.stop)

    def test_one_job_across_the_hosts_over_etcd(self):
        worker = self.script("w.sh", f"echo $RANK $WORLD_SIZE > {self.dir}/ran.$RANK\necho \"hello from rank $RANK\"\n")
        p = subprocess.run([CXXRUN, "--hosts=" + ",".join(HOSTS), f"--rsh={self.rsh}", "--rdzv-backend=etcd-v3",
                            f"--rdzv-endpoint={self.cluster.endpoints()}", f"--rdzv-id={uuid.uuid4().hex[:12]}",
                            "--rdzv-conf=join_timeout=30", "--no-python", worker],
                           env=clean_env(), capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr)
        ran = {}
        for n in os.listdir(self.dir):
            if n.startswith("ran."):
                with open(os.path.join(self.dir, n)) as f:
                    ran[int(n.split(".")[1])] = f.read().split()
        self.assertEqual(ran, {0: ["0", "3"], 1: ["1", "3"], 2: ["2", "3"]})
        self.assertEqual(sum("hello from rank" in line for line in p.stdout.splitlines()), 3, p.stdout)
        with open(f"{self.dir}/rsh.log") as f:
            self.assertEqual(sorted(line.split("\t", 1)[0] for line in f.read().splitlines()), HOSTS)


class BadHostLists(OrphanCheckTest):
    def refused(self, *args):
        p = subprocess.run([CXXRUN, *args, "--no-python", "/bin/true"], env=clean_env(), capture_output=True,
                           text=True, timeout=30, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assertEqual(len(p.stderr.splitlines()), 1, p.stderr)
        self.assertTrue(p.stderr.startswith("cxxrun: error: "), p.stderr)
        return p.stderr

    def hostfile(self, text):
        path = os.path.join(self.dir, "hosts")
        with open(path, "w") as f:
            f.write(text)
        return f"--hostfile={path}"

    def test_bad_hostfiles_exit_2(self):
        self.assertIn("no hosts", self.refused(self.hostfile("# only a comment\n\n")))
        self.assertIn("line 3: host 'a' is named again", self.refused(self.hostfile("a\nb slots=2\na:2\n")))
        self.assertIn("line 1: slots 'none' must be a whole number", self.refused(self.hostfile("a slots=none\n")))
        self.assertIn("has the character ';'", self.refused(self.hostfile("a;touch x\n")))
        self.assertIn("a leading '-'", self.refused(self.hostfile("-oProxyCommand=sh\n")))
        self.assertIn("PET_HOSTS=a,a", self.refused_env(PET_HOSTS="a,a"))

    def refused_env(self, **env):
        p = subprocess.run([CXXRUN, "--no-python", "/bin/true"], env=clean_env(**env), capture_output=True,
                           text=True, timeout=30, stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 2, p.stderr)
        return p.stderr
