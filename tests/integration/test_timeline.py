"""python -m cxxrun.timeline on the event logs of real jobs (--event-log): a
job whose worker fails once and succeeds after a restart, on one node and
on two loopback nodes (c10d, a log each), drawn as a PNG by the system
python with the source tree's package on PYTHONPATH, as an installed copy
would run. What it read is checked through the module's own parser: one
row per node, both attempts, the failure with its cause, the restart. It
holds with or without the agent's PHASE events (without them the bars come
from the worker events)."""
import os
import re
import subprocess
import sys
import uuid

from harness import TempDirTest, clean_env, finish_all, free_port, run, start

PACKAGE = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "agent", "python"))
SYSTEM_PYTHON = "/usr/bin/python3"
sys.path.insert(0, PACKAGE)
from cxxrun import timeline  # noqa: E402

# Global rank FAIL_RANK raises once (the marker file says it did), then
# every rank succeeds.
FAILS_ONCE = """
import os, sys, time
marker = sys.argv[1]
time.sleep(0.3)
if os.environ["RANK"] == os.environ["FAIL_RANK"] and not os.path.exists(marker):
    open(marker, "w").close()
    raise ValueError("loss is NaN")
"""


def has_matplotlib():
    return subprocess.run([SYSTEM_PYTHON, "-c", "import matplotlib"], capture_output=True, timeout=60).returncode == 0


class Timeline(TempDirTest):
    def setUp(self):
        super().setUp()
        if not has_matplotlib():
            self.skipTest(f"no matplotlib for {SYSTEM_PYTHON} (python3-matplotlib)")
        self.worker = os.path.join(self.dir, "w.py")
        with open(self.worker, "w") as f:
            f.write(FAILS_ONCE)
        self.marker = os.path.join(self.dir, "failed-once")

    def draw(self, logs, nodes):
        png = os.path.join(self.dir, "job.png")
        p = subprocess.run([SYSTEM_PYTHON, "-m", "cxxrun.timeline", *logs, "-o", png, "--title", "fails once"],
                           capture_output=True, text=True, timeout=120,
                           env=dict(clean_env(), PYTHONPATH=PACKAGE, PYTHONDONTWRITEBYTECODE="1"))
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertRegex(p.stdout, rf"^cxxrun\.timeline: wrote {re.escape(png)}: {nodes} node\(s\), 2 attempt\(s\), "
                         r"\d+\.\d s \((phases from PHASE events|no PHASE events: bars from worker events)\)\n$")
        with open(png, "rb") as f:
            data = f.read()
        self.assertEqual(data[:8], b"\x89PNG\r\n\x1a\n")
        self.assertGreater(len(data), 20_000)
        return timeline.build(timeline.read_events(logs), logs)

    def check(self, t, nodes, failed_rank):
        self.assertEqual(len(t.rows), nodes)
        self.assertEqual(t.attempts, [0, 1])
        self.assertEqual([n for n, _ in t.restarts], [1])
        # Every node has bars in both attempts, before and after the restart.
        for row in t.rows:
            for attempt in (0, 1):
                self.assertTrue([s for s in t.spans if s.row == row.key and s.attempt == attempt],
                                f"{row.label}: no bar in attempt {attempt}")
        failures = [m for m in t.marks if m.kind == "failed"]
        self.assertEqual([m.text for m in failures], [f"rank {failed_rank}: ValueError: loss is NaN (w.py:7)"])
        self.assertEqual(failures[0].attempt, 0)

    def test_one_node_that_fails_once(self):
        log = os.path.join(self.dir, "events.jsonl")
        rc, out, err = run(["--nproc-per-node=2", "--max-restarts=1", f"--event-log={log}", self.worker,
                            self.marker], env=clean_env(FAIL_RANK=1), timeout=90)
        self.assertEqual(rc, 0, err)
        t = self.draw([log], 1)
        self.check(t, 1, 1)
        self.assertRegex(t.rows[0].label, r"^\S+ node 0")

    def test_two_loopback_nodes_with_a_log_each(self):
        port, run_id = free_port(), uuid.uuid4().hex
        logs = [os.path.join(self.dir, f"node{i}.jsonl") for i in range(2)]
        procs = [start(["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={run_id}",
                        "--nnodes=2", "--nproc-per-node=2", "--max-restarts=1", f"--event-log={log}",
                        self.worker, self.marker], env=clean_env(FAIL_RANK=3))
                 for log in logs]
        for rc, out, err in finish_all(self, procs, 120):
            self.assertEqual(rc, 0, err)
        t = self.draw(logs, 2)
        self.check(t, 2, 3)
        # Both agents are on this host: each row names its file.
        self.assertEqual(sorted(r.source for r in t.rows), ["node0.jsonl", "node1.jsonl"])
