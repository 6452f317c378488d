"""Hang detection, fault injection, the event log and the health endpoint."""
import json
import os
import time
import urllib.request

from harness import (EXAMPLES, TORCH_PYTHON, TempDirTest, alive, clean_env, free_port, read_pids, run, start,
                     summary_blocks, torch_importable, wait_for)

DEMO = os.path.join(EXAMPLES, "heartbeat_demo")



class Hangs(TempDirTest):
    def test_sigstopped_worker_is_detected_and_the_group_restarts(self):
        rc, out, err = run(["--nproc-per-node=2", "--heartbeat-timeout=1", "--max-restarts=1",
                            "--inject-fault=stop:rank=1,after=500", DEMO, "--steps", "25"], timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertIn("worker hung: local rank 1: no heartbeat", err)
        # The stop is the hang's reason, in the failure.
        self.assertIn("rank 1 was stopped by a signal at", err)
        self.assertIn("restarting, attempt 1 of 1", err)

    def test_section_timeout_from_the_worker(self):
        rc, out, err = run(["--nproc-per-node=1", "--heartbeat-timeout=30", DEMO, "--steps", "10",
                            "--hang-at", "2", "--timeout", "0.5"], timeout=60)
        self.assertEqual(rc, 240, err)  # a hang cxxrun killed (docs/exit-codes.md)
        self.assertIn("section 'step' open for", err)
        self.assertIn("cause     : killed-by-cxxrun: the hang watchdog: local rank 0: section 'step'", err)

    def test_section_timeout_from_the_command_line(self):
        rc, out, err = run(["--nproc-per-node=1", "--section-timeout=step=0.5", DEMO, "--steps", "10",
                            "--hang-at", "2", "--timeout", "600"], timeout=60)
        self.assertEqual(rc, 240, err)
        self.assertIn("--section-timeout", err)

    def test_stack_dump_signal_comes_first(self):
        worker = self.script("w.sh", f"""
trap 'echo dumped > {self.dir}/dump.$LOCAL_RANK' USR1
{DEMO} --steps 10 --hang-at 1 --timeout 0.3 &
child=$!
wait $child
wait $child
""")
        # The demo itself is the worker's child: the shell records the dump
        # signal the agent sends to the worker's pid before the SIGKILL.
        rc, out, err = run(["--nproc-per-node=1", "--section-timeout=step=0.3", "--stack-dump-signal=SIGUSR1",
                            worker], timeout=60)
        self.assertEqual(rc, 240, err)
        self.assertTrue(os.path.exists(f"{self.dir}/dump.0"), "the worker got SIGUSR1 before SIGKILL")

    def test_one_hang_gives_one_verdict_line(self):
        # A torch file-timer scope and a section expire in the same tick (the
        # scope a few ms first): two judges, one hang, one line, one kill.
        script = os.path.join(self.dir, "w.py")
        with open(script, "w") as f:
            f.write("import json, os, threading, time\n"
                    "import cxxrun\n"
                    "with cxxrun.section('step', timeout=2):\n"
                    "    request = {'version': 1, 'pid': os.getpid(), 'scope_id': 's', 'signal': 9,\n"
                    "               'expiration_time': time.time() + 1.995}\n"
                    "    with open(os.environ['TORCHELASTIC_TIMER_FILE'], 'w') as fifo:\n"
                    "        fifo.write(json.dumps(request) + '\\n')\n"
                    "    threading.Event().wait()\n")
        rc, out, err = run(["--nproc-per-node=1", "--heartbeat-timeout=60", script],
                           env=clean_env(TORCHELASTIC_ENABLE_FILE_TIMER="1"), timeout=60)
        self.assertEqual(rc, 240, err)
        self.assertEqual(err.count("worker hung: "), 1, err)
        self.assertEqual(err.count("hang: "), 1, err)

    def test_scopes_expiring_together_kill_the_blamed_ranks_own(self):
        # Every rank's file-timer scope expires at the same instant; rank 3
        # wedged elsewhere than the others wait: its scope is the one acted on.
        script = os.path.join(self.dir, "w.py")
        with open(script, "w") as f:
            f.write("import json, os, threading\n"
                    "def wait_for_peers():\n"
                    "    threading.Event().wait()\n"
                    "def wedge():\n"
                    "    threading.Event().wait()\n"
                    "request = {'version': 1, 'pid': os.getpid(), 'scope_id': 'step', 'signal': 9,\n"
                    "           'expiration_time': float(os.environ['EXPIRE_AT'])}\n"
                    "with open(os.environ['TORCHELASTIC_TIMER_FILE'], 'w') as fifo:\n"
                    "    fifo.write(json.dumps(request) + '\\n')\n"
                    "wedge() if os.environ['RANK'] == '3' else wait_for_peers()\n")
        rc, out, err = run(["--nproc-per-node=4", script],
                           env=clean_env(TORCHELASTIC_ENABLE_FILE_TIMER="1", EXPIRE_AT=str(time.time() + 5)),
                           timeout=60)
        self.assertEqual(rc, 240, err)
        self.assertIn("4 verdicts in one tick", err)
        _, root = summary_blocks(err)
        self.assertIn("rank      : 3 (local_rank: 3)", root)
        self.assertIn("scope 'step' of local rank 3 expired", root)
        self.assertIn("rank 3 stands apart", root)

    def test_injected_kill_restarts_once(self):
        worker = self.script("w.sh", f"echo $$ > {self.dir}/pid.$TORCHELASTIC_RESTART_COUNT.$RANK\nsleep 2\n")
        rc, out, err = run(["--nproc-per-node=2", "--max-restarts=1", "--inject-fault=kill:rank=0,after=200", worker],
                           timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertIn("fault injection: sending SIGKILL to rank 0", err)
        self.assertEqual(len(read_pids(self.dir, "pid.1.")), 2)


class Observability(TempDirTest):
    def test_event_log_has_torchelastic_events(self):
        log = os.path.join(self.dir, "events.jsonl")
        worker = self.script("w.sh", '[ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && exit 3; exit 0\n')
        rc, out, err = run(["--nproc-per-node=2", "--max-restarts=1", f"--event-log={log}", worker])
        self.assertEqual(rc, 0, err)
        with open(log) as f:
            events = [json.loads(line) for line in f]
        names = [e["name"] for e in events]
        self.assertEqual(names.count("torchelastic.worker.status.START"), 4)
        self.assertIn("torchelastic.worker.status.FAILED", names)
        self.assertIn("torchelastic.worker.status.TERMINATED", names)
        self.assertEqual(names.count("torchelastic.worker.status.SUCCEEDED"), 3)  # 2 workers, then the agent
        failed = next(e for e in events if e["name"] == "torchelastic.worker.status.FAILED")
        self.assertEqual(failed["metadata"]["global_rank"], 1)

    def test_health_endpoint(self):
        port = free_port()
        worker = self.script("w.sh", f"""
[ "$LOCAL_RANK" = 0 ] || exec {DEMO} --steps 50
sleep 0.5
python3 - <<'PY'
import urllib.request
for path in ("healthz", "metrics"):
    with open("{self.dir}/" + path, "wb") as f:
        f.write(urllib.request.urlopen("http://127.0.0.1:{port}/" + path, timeout=10).read())
PY
""")
        p = start(["--nproc-per-node=2", f"--health-port={port}", "--health-host=127.0.0.1",
                   "--heartbeat-timeout=30", worker])
        try:
            wait_for(lambda: os.path.exists(f"{self.dir}/metrics") and os.path.getsize(f"{self.dir}/metrics") > 0,
                     timeout=30, what="the worker to read the health endpoint")
        finally:
            p.kill()
            p.communicate(timeout=10)
        with open(f"{self.dir}/healthz") as f:
            health = json.load(f)
        self.assertEqual(health["state"], "HEALTHY")
        self.assertEqual(len(health["workers"]), 2)
        beating = [w for w in health["workers"] if w["local_rank"] == 1][0]
        self.assertIsNotNone(beating["seconds_since_heartbeat"], "the demo beats every 100 ms")
        self.assertLess(beating["seconds_since_heartbeat"], 5)
        with open(f"{self.dir}/metrics") as f:
            self.assertIn("cxxrun_restart_count 0", f.read())

    def test_health_server_listens_on_loopback_by_default(self):
        # Least exposure: /healthz says which pids run, so no other host may read it
        # unless --health-host asks for that. TORCHELASTIC_HEALTH_CHECK_PORT alike.
        ok = self.script("ok.sh", "exit 0\n")
        for args, env in ((["--health-port=0"], clean_env()),
                          ([], clean_env(TORCHELASTIC_HEALTH_CHECK_PORT="0"))):
            rc, out, err = run(args + [ok], env=env, timeout=30)
            self.assertEqual(rc, 0, err)
            self.assertIn("health endpoint on http://127.0.0.1:", err)


class FileTimer(TempDirTest):
    def test_torch_file_timer_client_gets_a_hung_worker_killed(self):
        if not torch_importable("torch.distributed.elastic.timer"):
            self.skipTest(f"torch is not importable by {TORCH_PYTHON}")
        script = os.path.join(self.dir, "hang.py")
        with open(script, "w") as f:
            f.write("""
import os, time
import torch.distributed.elastic.timer as timer
timer.configure(timer.FileTimerClient(os.environ["TORCHELASTIC_TIMER_FILE"]))
with timer.expires(after=1):
    time.sleep(120)
""")
        # Exec'd, and forked from the forkserver (whose workers /proc may
        # show with the zygote's environment, without the attempt's token),
        # in the job's cgroup and without one (the agent's descendants).
        for method, containment in (("spawn", "auto"), ("forkserver", "auto"), ("forkserver", "subreaper")):
            rc, out, err = run([f"--start-method={method}", "--nproc-per-node=1", script],
                               env=clean_env(PYTHON_EXEC=TORCH_PYTHON, TORCHELASTIC_ENABLE_FILE_TIMER="1",
                                             CXXRUN_CONTAINMENT=containment),
                               timeout=120)
            self.assertIn("containment: no cgroup" if containment == "subreaper" else "containment: the job's", err)
            # The expiry is in the summary, with the rank, and the job exits
            # with the hang code, not a bare SIGKILL's 137.
            self.assertEqual(rc, 240, err)
            self.assertIn("worker hung: scope", err)
            self.assertIn("rank      : 0 (local_rank: 0)", err)
            self.assertIn("cause     : killed-by-cxxrun: torch's file timer: scope", err)
            self.assertIn("of local rank 0 expired (the worker's request: SIGKILL)", err)
            # Its stack at the expiry is the traceback.
            self.assertIn("in <module>", err[err.index("traceback :"):])
