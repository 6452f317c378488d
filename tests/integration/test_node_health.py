"""Bad nodes step out: a node that fails a health check before a round (its
first, or a restart's) does not join, exits 243 with one line naming the
check, names itself in --exclude-file and the event log, and a waiting spare
takes its place at the same world size. Agents on loopback, the job's store
in cxxrun-rdzv (as on a cluster: it outlives every agent)."""
import json
import os
import resource
import signal
import socket
import subprocess
import time
import uuid

from harness import (CXXRUN, RDZV_SERVER, OrphanCheckTest, TempDirTest, clean_env, end, finish_all, free_port, run,
                     start, wait_for, with_marker)

UNHEALTHY = 243


class NodeHealth(TempDirTest):
    def setUp(self):
        super().setUp()
        self.port = free_port()
        self.run_id = uuid.uuid4().hex[:12]
        self.procs = []
        server = subprocess.Popen([RDZV_SERVER, f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (server.kill(), server.wait(timeout=10)))
        # Listening before any agent starts: else the first agent hosts the
        # store itself, and takes it along when it steps out.
        wait_for(lambda: self.listening(), timeout=10, what="cxxrun-rdzv to listen")

    def listening(self):
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=10)
        super().tearDown()

    def agent(self, worker, extra=(), nproc=2):
        args = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{self.port}", f"--rdzv-id={self.run_id}",
                "--nnodes=2", f"--nproc-per-node={nproc}"] + list(extra) + [worker]
        p = start(args)
        self.procs.append(p)
        return p

    def dump_worker(self, body=""):
        return self.script("w.sh", f'env -0 > {self.dir}/env.$TORCHELASTIC_RESTART_COUNT.$RANK.$$\n' + body)

    def envs(self, attempt):
        out = []
        for name in os.listdir(self.dir):
            if name.startswith(f"env.{attempt}."):
                with open(os.path.join(self.dir, name)) as f:
                    out.append(dict(kv.split("=", 1) for kv in f.read().split("\0") if kv))
        return out

    def check_world(self, attempt, nodes, nproc):
        envs = self.envs(attempt)
        self.assertEqual(sorted(int(e["RANK"]) for e in envs), list(range(nodes * nproc)))
        self.assertEqual({e["WORLD_SIZE"] for e in envs}, {str(nodes * nproc)})
        return envs

    def test_a_node_that_fails_its_check_is_replaced_by_the_spare(self):
        worker = self.dump_worker()
        exclude = os.path.join(self.dir, "exclude")
        events = os.path.join(self.dir, "events.jsonl")
        bad = self.agent(worker, [f"--health-check=echo 'GPU 2 needs a reset'; exit 1", f"--exclude-file={exclude}",
                                  f"--event-log={events}"])
        good = [self.agent(worker, ["--health-check=true", f"--exclude-file={exclude}"]) for _ in range(2)]
        results = finish_all(self, [bad] + good, timeout=90)
        rc, out, err = results[0]
        self.assertEqual(rc, UNHEALTHY, err)
        self.assertIn("health check 'command' failed: GPU 2 needs a reset (exit 1 of", err)
        self.assertIn("it does not join job", err)
        for rc, out, err in results[1:]:
            self.assertEqual(rc, 0, err)
            self.assertIn("health check command: ok", err)
        # The job ran at its full size: 2 nodes x 2 workers, without the bad one.
        self.check_world(0, 2, 2)
        with open(exclude) as f:
            self.assertEqual(f.read(), socket.gethostname() + "\n")
        with open(events) as f:
            [event] = [json.loads(line) for line in f if "NODE_UNHEALTHY" in line]
        self.assertEqual(event["name"], "cxxrun.agent.NODE_UNHEALTHY")
        self.assertIn("GPU 2 needs a reset", event["metadata"]["raw_error"])
        inner = json.loads(event["metadata"]["metadata"])
        self.assertEqual(inner["check"], "command")
        self.assertEqual(inner["excluded_host"], socket.gethostname())

    def test_a_node_unhealthy_at_a_restart_steps_out_and_the_spare_takes_its_place(self):
        # Rank 0 fails once; at the restart one member's check fails (its
        # second run), so it steps out and the spare fills the next round.
        worker = self.dump_worker('if [ "$RANK" = 0 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then sleep 0.5; '
                                  'exit 3; fi\n')
        counter = os.path.join(self.dir, "checks")
        check = f"echo x >> {counter}; [ $(wc -l < {counter}) -lt 2 ] || {{ echo 'disk /scratch is failing'; exit 1; }}"
        flaky = self.agent(worker, [f"--health-check={check}", "--max-restarts=1"])
        steady = self.agent(worker, ["--max-restarts=1"])
        wait_for(lambda: len(self.envs(0)) == 4, timeout=60, what="the first round's 4 workers")
        spare = self.agent(worker, ["--max-restarts=1"])
        results = finish_all(self, [flaky, steady, spare], timeout=90)
        rc, out, err = results[0]
        self.assertEqual(rc, UNHEALTHY, err)
        self.assertIn("health check 'command' failed: disk /scratch is failing", err)
        self.assertIn("it steps out of job", err)
        for rc, out, err in results[1:]:
            self.assertEqual(rc, 0, err)
        # The round after the restart: the steady node's attempt 1 and the
        # spare's first, one workers' store, 2 nodes x 2 workers.
        steady_port = {e["MASTER_PORT"] for e in self.envs(1)}
        self.assertEqual(len(steady_port), 1)
        last = [e for e in self.envs(0) + self.envs(1) if e["MASTER_PORT"] in steady_port]
        self.assertEqual(sorted(int(e["RANK"]) for e in last), [0, 1, 2, 3])
        self.assertEqual({e["WORLD_SIZE"] for e in last}, {"4"})
        self.assertEqual({e["GROUP_RANK"] for e in last}, {"0", "1"})

    def test_a_node_that_keeps_failing_first_steps_out_at_max_node_failures(self):
        # Only the node started with BAD=1 fails (its workers inherit it), at
        # every attempt; the other's workers would succeed. At its second
        # failure it steps out, and the elastic job (--nnodes=1:2) re-forms
        # without it at once and finishes.
        worker = self.dump_worker('[ -n "$BAD" ] && { sleep 0.3; exit 5; }\nsleep 0.5\n')
        args = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{self.port}", f"--rdzv-id={self.run_id}",
                "--nnodes=1:2", "--nproc-per-node=2", "--max-restarts=3", "--max-node-failures=2",
                "--rdzv-conf=last_call_timeout=1", worker]
        bad = start(args, env=clean_env(BAD="1"))
        steady = start(args)
        self.procs += [bad, steady]
        results = finish_all(self, [bad, steady], timeout=90)
        rc, out, err = results[0]
        self.assertEqual(rc, UNHEALTHY, err)
        self.assertIn("health check 'max-node-failures' failed: this node's workers were the first to fail 2 times",
                      err)
        self.assertEqual(err.count("(attempt "), 2, err)  # two attempts, no third
        rc, out, err = results[1]
        self.assertEqual(rc, 0, err)
        # The last round: the steady node alone, 2 workers.
        self.assertEqual({e["WORLD_SIZE"] for e in self.envs(2)}, {"2"})

    def test_with_no_spare_the_others_stop_at_once_as_for_a_lost_node(self):
        worker = self.dump_worker('if [ "$RANK" = 0 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then sleep 0.3; '
                                  'exit 3; fi\n')
        counter = os.path.join(self.dir, "checks")
        check = f"echo x >> {counter}; [ $(wc -l < {counter}) -lt 2 ] || {{ echo 'NIC flapping'; exit 1; }}"
        # join_timeout would be the wait without the step-out.
        flags = ["--max-restarts=1", "--rdzv-conf=join_timeout=120"]
        flaky = self.agent(worker, [f"--health-check={check}"] + flags)
        steady = self.agent(worker, flags)
        results = finish_all(self, [flaky, steady], timeout=60)
        self.assertEqual(results[0][0], UNHEALTHY, results[0][2])
        rc, out, err = results[1]
        self.assertEqual(rc, 244, err)
        self.assertIn("stepped out (a failed health check) and no spare waits", err)

    def test_unhealthy_before_the_first_round_with_no_spare_the_others_stop_after_last_call(self):
        worker = self.dump_worker()
        # join_timeout would be the wait without the decline.
        flags = ["--rdzv-conf=join_timeout=120,last_call_timeout=2"]
        bad = self.agent(worker, ["--health-check=echo 'ECC errors on GPU 1'; exit 1"] + flags)
        good = self.agent(worker, flags)
        started = time.monotonic()
        results = finish_all(self, [bad, good], timeout=60)
        self.assertLess(time.monotonic() - started, 60)
        self.assertEqual(results[0][0], UNHEALTHY, results[0][2])
        self.assertIn("told the other nodes", results[0][2])
        rc, out, err = results[1]
        self.assertEqual(rc, 244, err)
        self.assertIn("ECC errors on GPU 1", err)
        self.assertIn("stepped out before joining", err)
        self.assertIn("no spare came within 2 s", err)
        self.assertEqual(self.envs(0), [])

    def test_unhealthy_before_the_first_round_a_late_spare_still_takes_its_place(self):
        worker = self.dump_worker()
        flags = ["--rdzv-conf=join_timeout=120,last_call_timeout=30"]
        bad = self.agent(worker, ["--health-check=echo 'disk full'; exit 1"] + flags)
        good = self.agent(worker, flags)
        self.assertEqual(bad.wait(timeout=30), UNHEALTHY)
        time.sleep(1)
        spare = self.agent(worker, flags)
        results = finish_all(self, [good, spare], timeout=60)
        for rc, out, err in results:
            self.assertEqual(rc, 0, err)
        self.check_world(0, 2, 2)

    def test_one_node_with_a_missing_path_does_not_start(self):
        missing = os.path.join(self.dir, "not-mounted")
        rc, out, err = run(["--nproc-per-node=2", f"--health-path={missing}:1G", "--no-python", "sh", "-c",
                            f"touch {self.dir}/ran"])
        self.assertEqual(rc, UNHEALTHY, err)
        self.assertIn(f"health check 'path {missing}' failed: {missing} does not exist (not mounted?)", err)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "ran")))

    def test_healthy_checks_say_so_in_one_line_each(self):
        rc, out, err = run([f"--health-path={self.dir}", "--health-check=echo fine", "--no-python", "true"])
        self.assertEqual(rc, 0, err)
        self.assertIn(f"health check path {self.dir}: writable", err)
        self.assertIn("health check command: fine", err)


class CheckProcesses(OrphanCheckTest):
    """What a check runs ends with the check: at a signal to the agent
    (handled: stop the check, exit by the normal path), and it runs under
    the limits a worker would."""

    def signal_during_check(self, sig, check_body, args, started):
        check = self.script("check.sh", check_body)
        p = start(["--standalone", "--nproc-per-node=1", f"--health-check={check}",
                   "--health-check-timeout=600"] + args)
        try:
            wait_for(lambda: os.path.exists(started) and with_marker(self.marker), timeout=30,
                     what="the check to run")
            p.send_signal(sig)
            out, err = p.communicate(timeout=30)
        finally:
            end(p)
        return p.returncode, err

    def test_a_signal_during_the_first_checks_stops_them_and_ends_the_agent(self):
        for sig, code in ((signal.SIGTERM, 143), (signal.SIGINT, 130)):
            with self.subTest(signal=sig.name):
                started = f"{self.dir}/started.{sig.name}"
                rc, err = self.signal_during_check(
                    sig, f"touch {started}\nsetsid sleep 120 {self.marker} &\nexec sleep 120 {self.marker}\n",
                    ["--no-python", "true"], started)
                self.assertEqual(rc, code, err)
                self.assertIn(f"received {sig.name} during the health checks; stopping them and exiting", err)
                self.assertIn(f"exiting with code {code}", err)
                self.assertEqual(with_marker(self.marker), [], err)

    def test_a_signal_during_a_restarts_checks_stops_them_and_ends_the_agent(self):
        started = f"{self.dir}/started"
        worker = self.script("w.sh", '[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 3\nexit 0\n')
        # The first round's check passes; the restart's hangs.
        body = (f"if [ -e {self.dir}/once ]; then touch {started}; exec sleep 120 {self.marker}; fi\n"
                f"touch {self.dir}/once\n")
        rc, err = self.signal_during_check(signal.SIGTERM, body, ["--max-restarts=1", "--no-python", worker], started)
        self.assertEqual(rc, 143, err)
        self.assertIn("received SIGTERM", err)
        self.assertEqual(with_marker(self.marker), [], err)

    def test_the_check_gets_the_open_files_limit_cxxrun_was_started_with(self):
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if hard != resource.RLIM_INFINITY and hard <= 512:
            self.skipTest(f"the hard open-files limit ({hard}) leaves nothing to raise")
        p = subprocess.run([CXXRUN, "--standalone", "--nproc-per-node=1", "--health-check=ulimit -Sn",
                            "--no-python", "true"], env=clean_env(), capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (512, hard)))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertIn("health check command: 512 (", p.stderr)


FAKE_NVML = os.environ.get("FAKE_NVML_LIBRARY", os.path.join(os.path.dirname(__file__),
                                                             "../../build/tests/fake_nvml/libnvidia-ml.so.1"))
ONE_GPU = "0.pci=00000000:3B:00.0\n0.uuid=GPU-aaaa1111-0000-0000-0000-000000000000\n0.name=NVIDIA H100\n"


class GpuChecks(TempDirTest):
    """The GPU checks through NVML, the real agent loading a fake
    libnvidia-ml.so.1 (tests/fake_nvml) that a state file drives."""

    def setUp(self):
        super().setUp()
        if not os.path.exists(FAKE_NVML):
            self.skipTest(f"no fake NVML at {FAKE_NVML} (the build's fake_nvml target)")
        self.state = os.path.join(self.dir, "nvml-state")

    def write_state(self, text):
        with open(self.state + ".tmp", "w") as f:
            f.write(text)
        os.replace(self.state + ".tmp", self.state)

    def env(self, **extra):
        return clean_env(CXXRUN_NVML_LIBRARY=FAKE_NVML, FAKE_NVML_STATE=self.state, **extra)

    def test_a_healthy_gpu_passes_and_says_so(self):
        self.write_state(ONE_GPU)
        rc, out, err = run(["--no-python", "true"], env=self.env())
        self.assertEqual(rc, 0, err)
        self.assertIn("health checks before every round: 1 GPU", err)
        self.assertIn("health check gpu-answers:", err)
        self.assertIn("health check gpu-xid: no new Xid", err)

    def test_a_lost_gpu_keeps_the_node_out(self):
        self.write_state(ONE_GPU + "0.lost=1\n")
        rc, out, err = run(["--no-python", "sh", "-c", f"touch {self.dir}/ran"], env=self.env())
        self.assertEqual(rc, UNHEALTHY, err)
        self.assertIn("health check 'gpu-answers' failed:", err)
        self.assertFalse(os.path.exists(os.path.join(self.dir, "ran")))

    def test_an_xid_during_the_attempt_stops_the_restart(self):
        # The worker fails after the GPU logs Xid 79 (fell off the bus): the
        # check before the restart finds it, and the node steps out.
        worker = self.script("w.sh", f'echo "0.xids=79" >> {self.state}\nexit 3\n')
        self.write_state(ONE_GPU)
        rc, out, err = run(["--max-restarts=2", "--no-python", worker], env=self.env())
        self.assertEqual(rc, UNHEALTHY, err)
        self.assertIn("health check 'gpu-xid' failed: Xid 79 on GPU 0 (0000:3b:00.0): the GPU fell off the bus", err)
        self.assertIn("it steps out of job", err)

    def test_memory_the_last_attempt_left_is_waited_for_then_the_restart_goes_on(self):
        # The first attempt's worker leaves 12 GiB "in use" and fails; the
        # memory is freed a moment later, while the agent waits for it.
        marker = os.path.join(self.dir, "failed")
        worker = self.script("w.sh", f'if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then '
                                     f'printf "{ONE_GPU}0.used=12884901888\\n" > {self.state}.tmp; '
                                     f'mv {self.state}.tmp {self.state}; touch {marker}; exit 3; fi\n')
        self.write_state(ONE_GPU)
        p = start(["--max-restarts=1", "--no-python", worker], env=self.env())
        try:
            wait_for(lambda: os.path.exists(marker), timeout=30, what="the first attempt to fail")
            time.sleep(0.5)
            self.write_state(ONE_GPU)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate(timeout=10)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("health check gpu-memory-drained: ", err)
        self.assertIn("starting 1 workers for entrypoint", err.split("gpu-memory-drained")[1])
