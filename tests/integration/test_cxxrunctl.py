"""cxxrunctl (docs/cxxrunctl.md) against real jobs: two agents meeting over a
loopback c10d store with a token, and the board they publish there.

Every wait here has a deadline, and each test kills only the processes it started.
"""
import json
import os
import re
import signal
import subprocess
import sys
import time
import unittest
import uuid

import etcd_cluster
from harness import CXXRUN, TempDirTest, alive, clean_env, free_port, read_pids, wait_for

CXXRUNCTL = os.environ.get("CXXRUNCTL", os.path.join(os.path.dirname(CXXRUN), "cxxrunctl"))

# Each rank writes its pid, then prints a line every 0.2 s for at most 120 s.
WORKER = r"""
import os, sys, time
with open(os.path.join(sys.argv[1], "pid." + os.environ["RANK"]), "w") as f:
    f.write(str(os.getpid()))
def train_loop():
    for step in range(600):
        print("rank", os.environ["RANK"], "step", step, flush=True)
        time.sleep(0.2)
train_loop()
"""


def ctl(*args, env=None, timeout=60):
    p = subprocess.run([CXXRUNCTL] + list(args), env=env or clean_env(), capture_output=True, text=True,
                       timeout=timeout, stdin=subprocess.DEVNULL)
    return p.returncode, p.stdout, p.stderr


class Job:
    """Two agents of 2 ranks each on one loopback c10d endpoint, with a token."""

    def __init__(self, test_dir, token_path, nproc=2, etcd=None):
        self.dir = test_dir
        self.port, self.run_id = free_port(), "ctl" + uuid.uuid4().hex[:8]
        self.token = token_path
        self.etcd = etcd
        worker = os.path.join(test_dir, "worker.py")
        with open(worker, "w") as f:
            f.write(WORKER)
        args = [*self.where(), "--nnodes=2", f"--nproc-per-node={nproc}", "--max-restarts=1",
                *([f"--rdzv-conf=token_file={token_path}"] if token_path else []), sys.executable, worker, test_dir]
        # Each agent's output to a file: a pipe nobody reads would fill and
        # hold the agent's loop (the workers print for as long as the tests run).
        self.logs = [os.path.join(test_dir, f"agent{i}.log") for i in range(2)]
        self.procs = []
        for path in self.logs:
            with open(path, "w") as out:
                self.procs.append(subprocess.Popen([CXXRUN] + args, env=clean_env(), stdout=out,
                                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))
        self.nranks = 2 * nproc

    def where(self):
        if self.etcd:
            return ["--rdzv-backend=etcd-v3", f"--rdzv-endpoint={self.etcd.endpoints()}", f"--rdzv-id={self.run_id}"]
        return ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{self.port}", f"--rdzv-id={self.run_id}"]

    def worker_pids(self):
        return read_pids(self.dir, "pid.")

    def output(self, i):
        with open(self.logs[i]) as f:
            return f.read()

    def wait(self, test, timeout):
        """Each agent's exit code, once all exited within `timeout`."""
        deadline = time.monotonic() + timeout
        for i, p in enumerate(self.procs):
            try:
                p.wait(timeout=max(1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                test.fail(f"agent {i} still running after {timeout}s:\n" + self.output(i))
        return [p.returncode for p in self.procs]

    def kill(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.wait(timeout=30)
        for pid in self.worker_pids():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


def token_file(directory, name, content):
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write(content)
    os.chmod(path, 0o600)
    return path


def group_line_ranks(line):
    """{rank: where} of a grouping line: "ranks 0–2 wait in X; rank 3 waits in Y"."""
    found = {}
    for part in line.split("; "):
        m = re.fullmatch(r"ranks? ([\d, \u2013]+) waits? in (.*)", part)
        if not m:
            continue
        for item in m.group(1).split(", "):
            first, _, last = item.partition("\u2013")
            for rank in range(int(first), int(last or first) + 1):
                found[rank] = m.group(2)
    return found


class RunningJobTest(TempDirTest):
    """status, top and the token against one job that runs through the class."""

    @classmethod
    def setUpClass(cls):
        cls._dir = TempDirTest()
        cls._dir.setUp()
        cls.tmp = cls._dir.dir
        cls.token = token_file(cls.tmp, "token", "the-job's-secret\n")
        cls.job = Job(cls.tmp, cls.token)
        # Every rank started, and every node's record shows it.
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            rc, out, _ = ctl("status", "--json", "--token-file", cls.token, *cls.job.where(), timeout=30)
            if rc == 0:
                doc = json.loads(out)
                states = [r["state"] for n in doc["nodes"] for r in n["ranks"]]
                if states.count("running") == cls.job.nranks and len(cls.job.worker_pids()) == cls.job.nranks:
                    return
            time.sleep(0.2)
        cls.job.kill()
        cls._dir.tearDown()
        raise AssertionError("the job's board never showed every rank running")

    @classmethod
    def tearDownClass(cls):
        cls.job.kill()
        cls._dir.tearDown()

    def test_status_lists_every_node_and_rank(self):
        rc, out, err = ctl("status", "--token-file", self.token, *self.job.where())
        self.assertEqual(rc, 0, err)
        self.assertIn(f"job {self.job.run_id}: 2 nodes, 4 ranks", out)
        pids = {p for p in self.job.worker_pids()}
        for rank in range(4):
            line = [l for l in out.splitlines() if l.strip().startswith(f"rank {rank} ")]
            self.assertEqual(len(line), 1, out)
            self.assertIn("running", line[0])
            pid = int(line[0].split("pid=")[1].split()[0])
            self.assertIn(pid, pids, out)
        nodes = [l for l in out.splitlines() if l.startswith("node ")]
        self.assertEqual(len(nodes), 2, out)
        agents = {p.pid for p in self.job.procs}
        for line in nodes:
            self.assertIn("running HEALTHY", line)
            self.assertIn("restarts=0/1", line)
            self.assertIn(int(line.split("agent=")[1].split()[0]), agents, line)

    def test_status_json_has_every_rank_with_its_state(self):
        rc, out, err = ctl("status", "--json", "--token-file", self.token, *self.job.where())
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual(doc["run_id"], self.job.run_id)
        self.assertEqual(sorted(n["group_rank"] for n in doc["nodes"]), [0, 1])
        ranks = {r["rank"]: r for n in doc["nodes"] for r in n["ranks"]}
        self.assertEqual(sorted(ranks), [0, 1, 2, 3])
        self.assertEqual({r["state"] for r in ranks.values()}, {"running"})
        self.assertEqual(sorted(r["pid"] for r in ranks.values()), sorted(self.job.worker_pids()))
        for n in doc["nodes"]:
            self.assertEqual(n["phase"], "running")
            self.assertEqual((n["attempt"], n["restarts"], n["max_restarts"]), (0, 0, 1))
            self.assertLess(n["updated_age_s"], 30)
            self.assertIs(n["straggler"], False)  # the straggler watch's verdict on the node

    def test_environment_fallbacks_name_the_job(self):
        env = clean_env(PET_RDZV_ENDPOINT=f"127.0.0.1:{self.job.port}", PET_RDZV_ID=self.job.run_id,
                        PET_RDZV_CONF=f"token_file={self.token}")
        rc, out, err = ctl("status", env=env)
        self.assertEqual(rc, 0, err)
        self.assertIn("2 nodes, 4 ranks", out)

    def test_top_prints_one_frame_per_interval_when_not_a_terminal(self):
        rc, out, err = ctl("top", "-n", "2", "--interval", "0.2", "--token-file", self.token, *self.job.where())
        self.assertEqual(rc, 0, err)
        frames = [f for f in out.split("cxxrunctl top: ") if f]
        self.assertEqual(len(frames), 2, out)
        for frame in frames:
            rows = [l.split() for l in frame.splitlines()[2:] if l.strip() and not l.startswith("(")]
            self.assertEqual(sorted(int(r[0]) for r in rows), [0, 1, 2, 3], frame)
        self.assertNotIn("\x1b[", out)  # no escapes into a pipe

    def step_lines(self, out):
        """{rank: [steps]} of the worker's lines in `out`, as `logs` prints them."""
        found = {}
        for line in out.splitlines():
            m = re.fullmatch(r"\[rank(\d+)\]: rank (\d+) step (\d+)", line)
            self.assertIsNotNone(m, line)
            self.assertEqual(m.group(1), m.group(2), line)  # the prefix names the rank that wrote it
            found.setdefault(int(m.group(1)), []).append(int(m.group(3)))
        return found

    def test_logs_merge_every_ranks_lines_across_nodes(self):
        rc, out, err = ctl("logs", "--token-file", self.token, *self.job.where())
        self.assertEqual(rc, 0, err)
        steps = self.step_lines(out)
        self.assertEqual(sorted(steps), [0, 1, 2, 3], out)
        for rank, seen in steps.items():
            self.assertEqual(seen, sorted(seen), f"rank {rank}'s lines out of order")

    def test_logs_of_one_rank(self):
        rc, out, err = ctl("logs", "--rank", "2", "--token-file", self.token, *self.job.where())
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(self.step_lines(out)), [2], out)

    def test_logs_follow_sees_new_lines(self):
        p = subprocess.Popen([CXXRUNCTL, "logs", "--follow", "--rank", "1", "--token-file", self.token,
                              *self.job.where()], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=clean_env())
        try:
            first = None
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                line = p.stdout.readline()
                if not line:
                    self.fail("logs --follow ended: " + p.stderr.read())
                step = self.step_lines(line)[1][0]
                first = step if first is None else first
                if step >= first + 15:  # three seconds of the worker's lines after the first batch
                    break
            else:
                self.fail("logs --follow saw no new lines")
        finally:
            p.send_signal(signal.SIGINT)
            _, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)

    def stack_headers(self, out):
        """{rank: (pid, where)} of the rank headers `stacks` prints."""
        found = {}
        for line in out.splitlines():
            m = re.fullmatch(r"rank (\d+) pid=(\d+) host=\S+ node=\S+: waits in (.*)", line)
            if m:
                self.assertNotIn(int(m.group(1)), found, out)
                found[int(m.group(1))] = (int(m.group(2)), m.group(3))
        return found

    def test_stacks_show_every_ranks_python_function_and_the_grouping_line(self):
        before = self.job.worker_pids()
        rc, out, err = ctl("stacks", "--token-file", self.token, *self.job.where())
        self.assertEqual(rc, 0, err)
        ranks = self.stack_headers(out)
        self.assertEqual(sorted(ranks), [0, 1, 2, 3], out)
        self.assertEqual(sorted(pid for pid, _ in ranks.values()), sorted(before), out)
        for rank, (_, where) in ranks.items():
            self.assertRegex(where, r"^train_loop at worker\.py:\d+$", out)
        # Each rank's own stack, as Python's faulthandler wrote it.
        self.assertEqual(len(re.findall(r'File ".*worker\.py", line \d+ in train_loop', out)), 4, out)
        # Then the line a hang verdict prints: every rank in a group, each in train_loop.
        grouped = group_line_ranks(out.strip().splitlines()[-1])
        self.assertEqual(sorted(grouped), [0, 1, 2, 3], out)
        for where in grouped.values():
            self.assertRegex(where, r"^train_loop at worker\.py:\d+$", out)
        # A look, not a verdict: nothing stopped, killed or restarted.
        self.job_keeps_running(before)

    def job_keeps_running(self, before):
        time.sleep(1)
        self.assertTrue(all(p.poll() is None for p in self.job.procs))
        self.assertEqual(sorted(self.job.worker_pids()), sorted(before))
        self.assertTrue(all(alive(pid) for pid in before))
        rc, out, err = ctl("status", "--json", "--token-file", self.token, *self.job.where())
        self.assertEqual(rc, 0, err)
        doc = json.loads(out)
        self.assertEqual({r["state"] for n in doc["nodes"] for r in n["ranks"]}, {"running"})
        self.assertEqual({n["restarts"] for n in doc["nodes"]}, {0})
        for i in range(2):  # no verdict's line ("hang: ...", "worker hung: ...")
            self.assertIsNone(re.search(r"\b(hang|hung):", self.job.output(i)), self.job.output(i))

    def test_stacks_of_one_rank(self):
        before = self.job.worker_pids()
        rc, out, err = ctl("stacks", "--rank", "2", "--token-file", self.token, *self.job.where())
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(self.stack_headers(out)), [2], out)
        self.assertRegex(out.strip().splitlines()[-1], r"^rank 2 waits in train_loop at worker\.py:\d+$")
        self.job_keeps_running(before)

    def test_stacks_of_a_rank_the_job_does_not_have_is_one_line_and_exit_2(self):
        rc, out, err = ctl("stacks", "--rank", "9", "--token-file", self.token, *self.job.where())
        self.assertEqual(rc, 2, err)
        self.assertEqual(out, "")
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("--rank=9: job " + self.job.run_id + " has no such rank", err)

    def test_without_the_token_the_store_refuses_in_one_line(self):
        for command in (["status"], ["stacks"]):
            rc, out, err = ctl(*command, *self.job.where())
            self.assertEqual(rc, 4, err)
            self.assertEqual(out, "")
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn("refused this client", err)
            self.assertIn("--token-file", err)

    def test_a_wrong_token_is_refused_and_learns_nothing(self):
        wrong = token_file(self.tmp, "wrong", "a-guess\n")
        for command in (["status"], ["status", "--json"], ["top", "-n", "1"], ["logs"], ["stacks"],
                        ["stacks", "--rank", "1"], ["stop"]):
            rc, out, err = ctl(*command, "--token-file", wrong, *self.job.where())
            self.assertEqual(rc, 4, err)
            self.assertEqual(out, "", command)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn("the store refused this client's token", err)
        # The refused stop stopped nothing.
        rc, out, err = ctl("status", "--json", "--token-file", self.token, *self.job.where())
        self.assertEqual(rc, 0, err)
        self.assertEqual({n["phase"] for n in json.loads(out)["nodes"]}, {"running"})
        self.assertTrue(all(p.poll() is None for p in self.job.procs))

    def test_another_run_id_is_not_on_the_board(self):
        rc, out, err = ctl("status", "--token-file", self.token, f"--rdzv-endpoint=127.0.0.1:{self.job.port}",
                           "--rdzv-id=not-this-job")
        self.assertEqual(rc, 5, err)
        self.assertIn("no agent of job=not-this-job is on the board", err)
        self.assertEqual(out, "")


class StopTest(TempDirTest):
    def tearDown(self):
        if getattr(self, "job", None):
            self.job.kill()
        super().tearDown()

    def test_stop_ends_the_job_with_143_and_leaves_no_process(self):
        token = token_file(self.dir, "token", "s3cret\n")
        job = self.job = Job(self.dir, token)
        wait_for(lambda: len(job.worker_pids()) == 4, timeout=60, what="every rank started")
        wait_for(lambda: ctl("status", "--token-file", token, *job.where(), timeout=30)[0] == 0, timeout=30,
                 what="the board")
        rc, out, err = ctl("stop", "--token-file", token, *job.where())
        self.assertEqual(rc, 0, err)
        self.assertIn("every node is stopping", out)
        for i, rc in enumerate(job.wait(self, 60)):
            self.assertEqual(rc, 143, job.output(i))
            self.assertIn("cxxrunctl stop (cxxrunctl on", job.output(i))
        for pid in job.worker_pids():
            wait_for(lambda: not alive(pid), timeout=10, what=f"worker {pid} gone")


@unittest.skipIf(etcd_cluster.unavailable(), etcd_cluster.unavailable())
class EtcdJobTest(TempDirTest):
    """The same commands against a job whose rendezvous is a 3-member etcd cluster."""

    def setUp(self):
        super().setUp()
        self.job = None
        self.cluster = etcd_cluster.EtcdCluster(3)
        self.cluster.start()

    def tearDown(self):
        if self.job:
            self.job.kill()
        self.cluster.stop()
        super().tearDown()

    def test_status_top_logs_stacks_and_stop_over_etcd(self):
        job = self.job = Job(self.dir, None, etcd=self.cluster)
        wait_for(lambda: len(job.worker_pids()) == 4, timeout=60, what="every rank started")

        def all_running():
            rc, out, _ = ctl("status", "--json", *job.where(), timeout=30)
            return rc == 0 and [r["state"] for n in json.loads(out)["nodes"] for r in n["ranks"]] == ["running"] * 4
        wait_for(all_running, timeout=30, what="every rank running on the board")
        rc, out, err = ctl("status", "--json", *job.where())
        self.assertEqual(rc, 0, err)
        ranks = {r["rank"]: r["pid"] for n in json.loads(out)["nodes"] for r in n["ranks"]}
        self.assertEqual(sorted(ranks.values()), sorted(job.worker_pids()))
        wait_for(lambda: {int(l.split("]")[0][5:]) for l in ctl("logs", *job.where())[1].splitlines()
                          if l.startswith("[rank")} == {0, 1, 2, 3}, timeout=30, what="every rank's lines")
        # stacks and top read the same board and requests through etcd.
        rc, out, err = ctl("stacks", *job.where(), timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(re.findall(r'File ".*worker\.py", line \d+ in train_loop', out)), 4, out)
        rc, out, err = ctl("top", "-n", "1", *job.where(), timeout=60)
        self.assertEqual(rc, 0, err)
        rows = [l.split() for l in out.split("cxxrunctl top: ")[1].splitlines()[2:] if l.strip() and not l.startswith("(")]
        self.assertEqual(sorted(int(r[0]) for r in rows), [0, 1, 2, 3], out)
        rc, out, err = ctl("stop", *job.where())
        codes = job.wait(self, 60)
        # Both agents' output in the message: a failure here is read from it.
        self.assertEqual(rc, 0, err + "".join(f"\n--- agent {i} ---\n" + job.output(i) for i in range(2)))
        for i, rc in enumerate(codes):
            self.assertEqual(rc, 143, job.output(i))
        for pid in job.worker_pids():
            wait_for(lambda: not alive(pid), timeout=10, what=f"worker {pid} gone")


@unittest.skipIf(etcd_cluster.unavailable(), etcd_cluster.unavailable())
class EtcdBoardGoneTest(TempDirTest):
    """stop against a store that outlives the job: the last agent to leave an
    etcd job removes the job's keys, the board with them, so a node whose last
    record cxxrunctl never saw stopping has left all the same."""

    def setUp(self):
        super().setUp()
        self.cluster = etcd_cluster.EtcdCluster(1)
        self.cluster.start()
        self.addCleanup(self.cluster.stop)

    def test_stop_ends_when_the_job_removed_its_board(self):
        board = "/torchelastic/p2p/cxxrun/rdzv/gonejob/board/"
        record = json.dumps({"v": 1, "node": "n1", "host": "h", "pid": 1, "phase": "running", "state": "HEALTHY",
                             "updated_ms": int(time.time() * 1000), "ranks": []})
        for key, value in ((board + "index", "n1\n"), (board + "node/n1", record)):
            self.assertEqual(self.cluster.etcdctl("put", key, value).returncode, 0)
        where = ["--rdzv-backend=etcd-v3", f"--rdzv-endpoint={self.cluster.endpoints()}", "--rdzv-id=gonejob",
                 "--timeout=20"]
        p = subprocess.Popen([CXXRUNCTL, "stop", *where], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=clean_env(), stdin=subprocess.DEVNULL)
        self.addCleanup(lambda: p.poll() is None and (p.kill(), p.communicate()))
        wait_for(lambda: self.cluster.etcdctl("get", board + "stop").stdout.strip(), 30, "the stop request")
        self.assertIsNone(p.poll())  # it waits for the node to show a stop
        self.assertEqual(self.cluster.etcdctl("del", "--prefix", "/torchelastic/p2p/cxxrun/rdzv/gonejob/").returncode, 0)
        out, err = p.communicate(timeout=15)  # well before its 20 s deadline
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("every node is stopping", out)


@unittest.skipIf(etcd_cluster.unavailable(), etcd_cluster.unavailable())
class EtcdAuthTest(TempDirTest):
    """cxxrunctl against etcd with authentication on: a wrong or absent login is refused, not unreachable."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = etcd_cluster.EtcdCluster(1)
        cls.cluster.start()
        cls.cluster.enable_auth()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()

    def where(self):
        return ["--rdzv-backend=etcd-v3", f"--rdzv-endpoint={self.cluster.endpoints()}", "--rdzv-id=authjob",
                "--timeout=5"]

    def test_a_wrong_or_absent_login_is_refused_in_one_line(self):
        wrong = token_file(self.dir, "wrong", "alice:not-her-password\n")
        for login in (["--token-file", wrong], []):
            for command in (["status"], ["logs"], ["stacks"], ["stop"]):
                rc, out, err = ctl(*command, *login, *self.where())
                self.assertEqual(rc, 4, (command, login, err))
                self.assertEqual(out, "", command)
                self.assertEqual(len(err.strip().splitlines()), 1, err)
                self.assertNotIn("not-her-password", err)
        # The right login reaches the board: no job is on it.
        right = token_file(self.dir, "right", "alice:alicepw\n")
        rc, out, err = ctl("status", "--token-file", right, *self.where())
        self.assertEqual(rc, 5, err)
        self.assertIn("no agent of job=authjob is on the board", err)


class BadInputTest(unittest.TestCase):
    def test_each_bad_value_is_one_line_and_exit_2(self):
        cases = [
            ([], "no command given"),
            (["status"], "no job named: give --rdzv-endpoint"),
            (["frobnicate", "--rdzv-endpoint=127.0.0.1:1"], "'frobnicate': unknown command"),
            (["status", "--rdzv-endpoint=127.0.0.1:99999"], "--rdzv-endpoint=127.0.0.1:99999"),
            (["status", "--rdzv-endpoint=h", "--rdzv-backend=zookeeper"], "--rdzv-backend=zookeeper: unknown"),
            (["status", "--rdzv-endpoint=h", "--rdzv-backend=static"], "has no rendezvous store to attach to"),
            (["status", "--rdzv-endpoint=h", "--rdzv-conf=bogus=1"], "--rdzv-conf bogus=1: unknown key"),
            (["status", "--rdzv-endpoint=h", "--rdzv-conf=token_file"], "is not KEY=VALUE"),
            (["status", "--rdzv-endpoint=h", "--token-file=/nonexistent/token"], "/nonexistent/token"),
            (["status", "--rdzv-endpoint=h", "--timeout=-1"], "--timeout=-1: must be a positive number"),
            (["top", "--rdzv-endpoint=h", "-n", "0"], "-n=0: must be a positive number of frames"),
            (["stop", "--json", "--rdzv-endpoint=h"], "--json: only status takes it"),
            (["logs", "--rank=-1", "--rdzv-endpoint=h"], "--rank=-1: must be a rank"),
            (["status", "--follow", "--rdzv-endpoint=h"], "--follow: only logs takes it"),
            (["stacks", "--rank=x", "--rdzv-endpoint=h"], "--rank=x: must be a rank"),
            (["stacks", "--follow", "--rdzv-endpoint=h"], "--follow: only logs takes it"),
            (["status", "--rank=1", "--rdzv-endpoint=h"], "--rank=1: only logs and stacks take it"),
            (["status", "--rdzv-endpoint=h", "--frobs"], "--frobs: unknown option"),
        ]
        for args, words in cases:
            rc, out, err = ctl(*args)
            self.assertEqual(rc, 2, (args, err))
            self.assertEqual(len(err.strip().splitlines()), 1, (args, err))
            self.assertIn(words, err, args)
            self.assertEqual(out, "")
        env = clean_env(PET_RDZV_BACKEND="consul")
        rc, _, err = ctl("status", "--rdzv-endpoint=h", env=env)
        self.assertEqual(rc, 2, err)
        self.assertIn("PET_RDZV_BACKEND=consul", err)

    def test_no_store_at_the_endpoint_is_one_line_and_exit_3(self):
        rc, out, err = ctl("status", f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--timeout=2", timeout=60)
        self.assertEqual(rc, 3, err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn("cannot reach the rendezvous store", err)
        self.assertEqual(out, "")


if __name__ == "__main__":
    unittest.main()
