"""Chaos: run cxxrun jobs with injected faults of every kind and check, after
each, what cxxrun promises:
  - no orphans: no process whose argv carries the fault's marker is alive,
    and no cgroup of the job's is left behind;
  - the right status: the job's exit code, and the root cause named;
  - the time bound: the job ended within its kind's bound.
Each defect fault injection ever found has a kind here, so CI keeps it fixed.

Used by tests/chaos/test_chaos.py (a few dozen faults, in CI) and by
bench/chaos.sh (a few hundred, figures in bench/RESULTS.md):
    python3 tests/chaos/chaos.py --faults 300 [--seed N] [--cxxrun build/bin/cxxrun]
"""
import argparse
import os
import random
import re
import resource
import socket
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD = os.path.join(HERE, "../../build")
sys.path.insert(0, os.path.join(HERE, "../integration"))
from harness import free_port, remove_cgroup_tree, with_marker  # noqa: E402  (the process-level tests' helpers)

# What a worker starts and leaves behind, however it tries to hide.
ESCAPES = [
    "sleep 120 {m} &",
    "env -i sleep 120 {m} &",
    "setsid env -i sleep 120 {m} &",
    "( env -i bash -c 'sleep 120 {m} &' & ) ; sleep 0.05",
]


class Fault:
    """One job with one fault: how to run it and what must come out."""

    def __init__(self, kind, rng, cxxrun, workdir):
        self.kind, self.rng, self.cxxrun, self.dir = kind, rng, cxxrun, workdir
        self.marker = "0.00%07d" % rng.randrange(10 ** 7)
        self.expected_rc, self.root_rank, self.bound, self.expect_text = 0, None, 30.0, None
        self.max_count = {}  # text -> the most times it may appear in any agent's stderr
        # Only a cgroup (root) catches a process that dropped its environment
        # and left the agent's tree after the agent itself was SIGKILLed.
        self.cgroup = os.geteuid() == 0

    def script(self, body):
        path = os.path.join(self.dir, f"w{self.rng.randrange(10 ** 9)}.sh")
        with open(path, "w") as f:
            f.write("#!/bin/bash\n" + body.replace("{m}", self.marker) + "\n")
        os.chmod(path, 0o755)
        return path

    def env(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_", "CXXRUN_"))}
        env["PET_MASTER_PORT"] = str(free_port())
        env["TMPDIR"] = self.dir
        return env

    def start(self, args, **kwargs):
        return subprocess.Popen([self.cxxrun] + args, env=self.env(), stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, **kwargs)

    def rdzv_server(self, *args, nofile=None):
        """A cxxrun-rdzv of this fault's own on a free port; returns (process, port)."""
        port = free_port()
        limit = (lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))) if nofile else None
        server = subprocess.Popen([os.path.join(os.path.dirname(self.cxxrun), "cxxrun-rdzv"), f"--port={port}", *args],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                                  preexec_fn=limit)
        wait_listening(port)
        return server, port

    def token_file(self, content="chaos-secret"):
        path = os.path.join(self.dir, f"token{self.rng.randrange(10 ** 9)}")
        with open(path, "w") as f:
            f.write(content + "\n")
        os.chmod(path, 0o600)
        return path

    def stop_server(self, server):
        def stop():
            server.kill()
            server.wait(timeout=10)
        return stop

    def standalone(self, nproc, body, extra=()):
        # A session of its own, as a scheduler starts it: the agent leads its
        # process group, which agent-group-sigkill kills whole.
        return self.start(["--standalone", f"--nproc-per-node={nproc}"] + list(extra) + [self.script(body)],
                          start_new_session=True)

    def wait_for_workers(self, count, timeout=20):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and len(os.listdir(self.started)) < count:
            time.sleep(0.02)

    def run(self):
        self.started = tempfile.mkdtemp(dir=self.dir)
        begin = time.monotonic()
        procs, extra_checks = getattr(self, "kind_" + self.kind.replace("-", "_"))()
        errs, rcs, hung, leftovers = [], [], False, []
        for p in procs:
            try:
                _, err = p.communicate(timeout=max(1, self.bound - (time.monotonic() - begin)))
            except subprocess.TimeoutExpired:
                hung = True
                p.kill()
                _, err = p.communicate(timeout=10)
            errs.append(err or "")
            rcs.append(p.returncode)
        for cleanup in extra_checks:
            cleanup()
        seconds = time.monotonic() - begin
        time.sleep(0.05)  # a killed process may take a moment to leave /proc
        orphans = with_marker(self.marker)
        for pid in orphans:
            os.kill(pid, signal.SIGKILL)
        for cgroup in {c for e in errs for c in re.findall(r"live in cgroup (\S+)", e)}:
            if not self.gone(cgroup):
                leftovers.append(cgroup)
                kill_cgroup(cgroup)
        expected = self.expected_rc if isinstance(self.expected_rc, tuple) else (self.expected_rc,)
        wrong = [] if hung else [rc for rc in rcs if rc not in expected]
        root_ok = all(self.root_named(e) for e in errs) if self.root_rank is not None and not hung else True
        text_ok = all(self.expect_text in e for e in errs) if self.expect_text and not hung else True
        counts_ok = all(e.count(text) <= most for e in errs for text, most in self.max_count.items())
        return {"kind": self.kind, "rcs": rcs, "expected": self.expected_rc, "orphans": len(orphans) + len(leftovers),
                "wrong": bool(wrong) or not root_ok or not text_ok or not counts_ok, "hung": hung,
                "seconds": round(seconds, 2), "stderr": errs}

    @staticmethod
    def gone(path, timeout=6.0):
        """The guardian removes a dead agent's cgroup within about 5 s."""
        deadline = time.monotonic() + timeout
        while os.path.exists(path) and time.monotonic() < deadline:
            time.sleep(0.05)
        return not os.path.exists(path)

    def root_named(self, err):
        root = err[err.find("Root Cause"):]
        return f"rank      : {self.root_rank} " in root

    def body(self, victim, action):
        escape = self.rng.choice(ESCAPES)
        return (f"touch {self.started}/$RANK\n{escape}\n"
                f"if [ \"$RANK\" = {victim} ]; then sleep 0.2; {action}; fi\nexec sleep 60 {{m}}")

    # --- the kinds ---------------------------------------------------------
    def kind_exit(self):
        nproc, code = self.rng.randint(2, 4), self.rng.randint(1, 120)
        victim = self.rng.randrange(nproc)
        self.expected_rc, self.root_rank = code, victim
        return [self.standalone(nproc, self.body(victim, f"exit {code}"))], []

    def kind_signal(self):
        nproc, sig = self.rng.randint(2, 4), self.rng.choice([signal.SIGSEGV, signal.SIGKILL, signal.SIGABRT])
        victim = self.rng.randrange(nproc)
        self.expected_rc, self.root_rank = 128 + sig, victim
        return [self.standalone(nproc, self.body(victim, f"kill -{int(sig)} $$"))], []

    def kind_inject(self):
        nproc = self.rng.randint(2, 4)
        victim = self.rng.randrange(nproc)
        self.expected_rc, self.root_rank = 137, victim
        body = f"touch {self.started}/$RANK\n{self.rng.choice(ESCAPES)}\nexec sleep 60 {{m}}"
        return [self.standalone(nproc, body, [f"--inject-fault=kill:rank={victim},after=300"])], []

    def kind_success(self):
        body = f"touch {self.started}/$RANK\n{self.rng.choice(ESCAPES)}\nsleep 0.2"
        return [self.standalone(self.rng.randint(1, 4), body)], []

    def kind_restart(self):
        nproc = self.rng.randint(2, 3)
        victim = self.rng.randrange(nproc)
        body = (f"{self.rng.choice(ESCAPES)}\n"
                f"if [ \"$RANK\" = {victim} ] && [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then sleep 0.2; exit 5; fi\n"
                "sleep 0.5")
        return [self.standalone(nproc, body, ["--max-restarts=1"])], []

    def kind_agent_sigterm(self):
        nproc = self.rng.randint(1, 3)
        self.expected_rc = 143
        p = self.standalone(nproc, f"touch {self.started}/$RANK\n{self.rng.choice(ESCAPES)}\nexec sleep 60 {{m}}")
        self.wait_for_workers(nproc)
        time.sleep(0.1)
        p.send_signal(signal.SIGTERM)
        return [p], []

    def agent_killed(self, kill):
        """A job whose agent `kill(p)` SIGKILLs once its workers run."""
        nproc = self.rng.randint(1, 3)
        self.expected_rc = -9
        escape = self.rng.choice(ESCAPES if self.cgroup else ESCAPES[:1])
        p = self.standalone(nproc, f"touch {self.started}/$RANK\n{escape}\nexec sleep 60 {{m}}")
        self.wait_for_workers(nproc)
        time.sleep(0.1)
        kill(p)
        # The guardian needs a moment after the agent is gone.
        return [p], [lambda: time.sleep(0.3)]

    def kind_agent_sigkill(self):
        return self.agent_killed(lambda p: p.kill())

    def kind_hang(self):
        self.expected_rc, self.root_rank = 240, 1  # a hang cxxrun killed (agent/exit_codes.h)
        demo = os.path.join(os.path.dirname(os.path.dirname(self.cxxrun)), "examples", "heartbeat_demo")
        # The demo takes no marker: a step count unique to this fault is one.
        self.marker = str(self.rng.randrange(10 ** 6, 10 ** 7))
        p = self.start(["--standalone", "--nproc-per-node=2", "--heartbeat-timeout=1",
                        "--inject-fault=stop:rank=1,after=300", demo, "--steps", self.marker])
        return [p], []

    def kind_multinode(self):
        port, job = free_port(), uuid.uuid4().hex[:8]
        code = self.rng.randint(1, 120)
        victim = self.rng.randrange(4)
        self.expected_rc, self.root_rank = code, victim
        body = self.body(victim, f"exit {code}")
        script = self.script(body)
        args = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={job}", "--nnodes=2",
                "--nproc-per-node=2", script]
        return [self.start(args) for _ in range(2)], []

    def c10d_job(self, nodes):
        """`nodes` agents of one worker each, meeting at a cxxrun-rdzv of
        their own; returns (agents, server) once every worker runs."""
        port, job = free_port(), uuid.uuid4().hex[:8]
        server = subprocess.Popen([os.path.join(os.path.dirname(self.cxxrun), "cxxrun-rdzv"), f"--port={port}"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        script = self.script(f"touch {self.started}/$RANK\n{self.rng.choice(ESCAPES)}\nexec sleep 60 {{m}}")
        args = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={job}",
                f"--nnodes={nodes}:{nodes}", "--nproc-per-node=1",
                "--rdzv-conf=is_host=false,keep_alive_interval=0.3", script]
        agents = [self.start(args) for _ in range(nodes)]
        self.wait_for_workers(nodes)
        return agents, server

    def kind_store_lost(self):
        self.expected_rc, self.expect_text, self.bound = 244, "lost the rendezvous store", 15.0
        procs, server = self.c10d_job(2)
        server.kill()
        server.wait(timeout=10)
        return procs, []


    def kind_paused(self):
        # A worker stopped by SIGSTOP and continued later: the job finishes.
        nproc = self.rng.randint(2, 3)
        victim = self.rng.randrange(nproc)
        p = self.standalone(nproc, f"{self.rng.choice(ESCAPES)}\nif [ \"$RANK\" = {victim} ]; then "
                                   f"echo $$ > {self.started}/paused; kill -STOP $$; fi\nsleep 0.2")
        def resume():
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and not os.path.exists(f"{self.started}/paused"):
                time.sleep(0.02)
            time.sleep(0.3)
            with open(f"{self.started}/paused") as f:
                os.kill(int(f.read()), signal.SIGCONT)
        resume()
        return [p], []

    def kind_stopped_agent(self):
        # --nnodes=3:3 and one agent (group rank 2) SIGSTOPed: both survivors
        # stop with exit 1 naming the minimum; the stopped one is killed after.
        self.expected_rc, self.expect_text, self.bound = 244, "fewer than the minimum of 3", 15.0
        procs, server = self.c10d_job(3)
        stopped = max(procs, key=lambda p: p.pid)  # one host: the largest pid is group rank 2
        os.kill(stopped.pid, signal.SIGSTOP)
        survivors = [p for p in procs if p is not stopped]

        def cleanup():
            stopped.kill()
            stopped.communicate(timeout=10)
            server.kill()
            server.wait(timeout=10)
        return survivors, [cleanup]

    def kind_bad_input(self):
        # A mistake on the command line: one line, exit 2, nothing started.
        self.expected_rc, self.expect_text = 2, "cxxrun: error:"
        standalone = ["--standalone", "--nproc-per-node=2"]
        bad = self.rng.choice([standalone + ["--nproc-per-node=0"], standalone + ["--nproc-per-node=99999"],
                               standalone + ["--local-ranks-filter=9"],
                               standalone + ["--inject-fault=kill:rank=99,after=1"], standalone + ["--max-restarts=-1"],
                               standalone + ["--rdzv-backend=nope", "--nnodes=2"], standalone + ["--log-dir=/proc/nope"],
                               # Not a host, and not an IPv6 address: it waited out join_timeout, exit 1.
                               ["--rdzv-backend=c10d", "--rdzv-endpoint=:::", "--nnodes=2"],
                               # A single-node static job's store is the workers': it was ignored, exit 0.
                               ["--nnodes=1", f"--master-port={free_port()}", f"--rdzv-conf=token_file={self.token_file()}"]])
        return [self.start(bad + [self.script("sleep 60 {m}")])], []

    def kind_agent_group_sigkill(self):
        # kill -9 -<agent pid>, as `timeout -s KILL` and many schedulers send
        # it: the guardian must not die with the agent's process group.
        return self.agent_killed(lambda p: os.killpg(p.pid, signal.SIGKILL))

    def kind_etcd_unreachable(self):
        # Nothing listens on the etcd endpoint: a line, and exit 1 at
        # join_timeout naming it (it ran on silently past 45 s).
        port = free_port()
        self.expected_rc, self.expect_text, self.bound = 1, f"127.0.0.1:{port}", 15.0
        return [self.start(["--rdzv-backend=etcd-v3", f"--rdzv-endpoint=127.0.0.1:{port}",
                            f"--rdzv-id={uuid.uuid4().hex[:8]}", "--rdzv-conf=join_timeout=3", "--no-python",
                            "sleep", "0.1", self.marker])], []

    def kind_no_token(self):
        # An agent without the token of a protected store fails after three
        # refused handshakes, not after join_timeout.
        self.expected_rc, self.expect_text, self.bound = 1, "refuses clients without it", 15.0
        server, port = self.rdzv_server("--token-file", self.token_file())
        agent = self.start(["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=notoken",
                            "--nnodes=1", "--nproc-per-node=1", "--rdzv-conf=is_host=false,join_timeout=60",
                            self.script("sleep 60 {m}")])
        return [agent], [self.stop_server(server)]

    def kind_silent_clients(self):
        # Connections that never answer the token challenge cannot lock the
        # real agents out of a store short of descriptors.
        self.bound = 15.0
        token = self.token_file()
        server, port = self.rdzv_server("--token-file", token, nofile=64)
        silent = []
        for _ in range(100):
            try:
                silent.append(socket.create_connection(("127.0.0.1", port), timeout=2))
            except OSError:
                break
        agent = self.start(["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=silent",
                            "--nnodes=1", "--nproc-per-node=1", f"--rdzv-conf=is_host=false,token_file={token}",
                            self.script("true {m}")])

        def close():
            for s in silent:
                s.close()
            self.stop_server(server)()
        return [agent], [close]

    def kind_restarted_node(self):
        # A node of a fixed-size job is SIGKILLed and started again under the
        # same id inside the keep-alive window: it waits as a spare, and takes
        # the dead node's place; the job goes on at the same size. (The
        # survivor stopped, "only 1 nodes alive", and the spare exited 0.)
        self.bound = 40.0
        server, port = self.rdzv_server()
        job = uuid.uuid4().hex[:8]
        script = self.script(f"touch {self.started}/$RANK.$TORCHELASTIC_RESTART_COUNT\n"
                             f"{self.rng.choice(ESCAPES)}\nsleep 6")
        args = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={job}", "--nnodes=2",
                "--nproc-per-node=1", "--rdzv-conf=is_host=false,keep_alive_interval=1", script]
        agents = [self.start(args, start_new_session=True) for _ in range(2)]
        self.wait_for_workers(2)
        victim = self.rng.choice(agents)
        victim.kill()
        victim.communicate(timeout=10)
        again = self.start(args, start_new_session=True)
        return [a for a in agents if a is not victim] + [again], [self.stop_server(server)]

    def kind_dead_after_success(self):
        # Node 0's workers succeed; node 1's agent is SIGKILLed while its
        # workers run. Node 0, waiting for the others to finish, must see the
        # death (exit 1, too few nodes); it waited forever.
        self.expected_rc, self.expect_text, self.bound = 244, "fewer than the minimum of 2", 20.0
        server, port = self.rdzv_server()
        script = self.script(f"touch {self.started}/$RANK\n{self.rng.choice(ESCAPES)}\n"
                             f"if [ \"$GROUP_RANK\" = 0 ]; then exit 0; fi\necho $PPID > {self.started}/agent1.pid\n"
                             "exec sleep 60 {m}")
        args = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={uuid.uuid4().hex[:8]}",
                "--nnodes=2", "--nproc-per-node=1", "--rdzv-conf=is_host=false,keep_alive_interval=0.3", script]
        agents = [self.start(args, start_new_session=True) for _ in range(2)]
        pid_file = f"{self.started}/agent1.pid"
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not os.path.exists(pid_file):
            time.sleep(0.02)
        time.sleep(0.3)  # node 0 is in its barrier by now
        with open(pid_file) as f:
            victim_pid = int(f.read())
        victim = next(a for a in agents if a.pid == victim_pid)
        victim.kill()
        victim.communicate(timeout=10)
        return [a for a in agents if a is not victim], [self.stop_server(server)]

    def kind_restarted_host(self):
        # As restarted-node, but the node killed hosted the rendezvous store:
        # the job's state died with it. Both the survivor and the restarted
        # node must fail: the survivor lost its store (244), the restarted
        # one cannot join (1); the restarted one exited 0, or waited.
        self.expected_rc, self.bound = (244, 1), 30.0
        port, job = free_port(), uuid.uuid4().hex[:8]
        script = self.script(f"touch {self.started}/$RANK\n{self.rng.choice(ESCAPES)}\nexec sleep 60 {{m}}")
        args = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={job}", "--nnodes=2",
                "--nproc-per-node=1", "--rdzv-conf=keep_alive_interval=1,join_timeout=6", script]
        host = self.start(args, start_new_session=True)
        wait_listening(port)  # until it hosts the store
        other = self.start(args, start_new_session=True)
        self.wait_for_workers(2)
        host.kill()
        host.communicate(timeout=10)
        again = self.start(args, start_new_session=True)
        return [other, again], []


KINDS = ["exit", "signal", "inject", "success", "restart", "agent-sigterm", "agent-sigkill", "hang", "multinode",
         "store-lost", "paused", "stopped-agent", "bad-input", "agent-group-sigkill", "etcd-unreachable", "no-token",
         "silent-clients", "restarted-node", "restarted-host", "dead-after-success"]


def wait_listening(port, timeout=10):
    """Until something accepts connections on loopback `port` (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.02)


def kill_cgroup(path):
    """A cgroup a dead agent left behind: killed and removed, children first."""
    remove_cgroup_tree(path, kill=True)


def run_faults(count, seed, cxxrun, log=None, kinds=None):
    rng = random.Random(seed)
    workdir = tempfile.mkdtemp(prefix="cxxrun_chaos_")
    results = []
    try:
        for i in range(count):
            pool = kinds or KINDS
            kind = pool[i % len(pool)] if i < len(pool) else rng.choice(pool)
            r = Fault(kind, rng, cxxrun, workdir).run()
            results.append(r)
            if log:
                bad = r["orphans"] or r["wrong"] or r["hung"]
                log(f"{i + 1:4d} {kind:14s} rc={r['rcs']} expected={r['expected']} orphans={r['orphans']} "
                    f"{r['seconds']:.2f}s{'  <-- BAD' if bad else ''}")
                if bad:
                    for n, err in enumerate(r["stderr"]):
                        log(f"--- agent {n} stderr (end) ---\n{err[-3000:]}")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return results


def summary(results):
    return {"faults": len(results), "orphans": sum(r["orphans"] for r in results),
            "wrong statuses": sum(r["wrong"] for r in results), "hangs": sum(r["hung"] for r in results),
            "slowest s": max((r["seconds"] for r in results), default=0)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--faults", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cxxrun", default=os.path.join(BUILD, "bin", "cxxrun"))
    ap.add_argument("--kind", action="append", choices=KINDS, help="only these kinds (repeatable)")
    args = ap.parse_args()
    results = run_faults(args.faults, args.seed, os.path.abspath(args.cxxrun), log=print, kinds=args.kind)
    s = summary(results)
    print(" ".join(f"{k}={v}" for k, v in s.items()))
    return 0 if s["orphans"] == s["wrong statuses"] == s["hangs"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
