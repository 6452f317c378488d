"""Stragglers are named with no code change (docs/stragglers.md): a rank
whose process is put under a CPU quota computes while its peers wait in the
collective, and is named within 30 s with its cgroup as the cause, in the
log, the event log and /metrics; across two nodes whose one node's workers
are all throttled, group rank 0 names that node and tells it. The healthy
job, --straggler-action=replace and a thermally throttled GPU (which needs
no CPU, so it runs among the parallel tests) are in test_straggler_healthy.py,
test_straggler_replace.py and test_straggler_gpu.py."""
import json
import os
import re
import socket
import subprocess
import unittest
import urllib.request
import uuid

from harness import RDZV_SERVER, end, free_port, start, wait_for
from stragglers import LOCKSTEP, NAMED_IN_TESTS, Output, ThrottleTest, lockstep_env, settle_then_throttle


class Throttled(ThrottleTest):
    def agent(self, args, **env):
        p = start(args, env=lockstep_env(self.dir, **env))
        self.addCleanup(end, p)
        return p, Output(p)

    def stop_job(self, procs):
        open(os.path.join(self.dir, "stop"), "w").close()
        for p in procs:
            self.assertEqual(p.wait(timeout=120), 0)

    def test_a_rank_under_a_cpu_quota_is_named_with_its_cause(self):
        events = os.path.join(self.dir, "events.jsonl")
        p, err = self.agent(["--standalone", "--nproc-per-node=4", "--health-port=0", f"--event-log={events}",
                             LOCKSTEP])
        quota = settle_then_throttle(self, self.dir, [3])
        wait_for(lambda: err.first("straggler: rank 3 on"), timeout=NAMED_IN_TESTS,
                 what="rank 3 to be named after its quota")
        _, line = err.first("straggler: rank 3 on")
        self.assertIn(f"straggler: rank 3 on {socket.gethostname()} computes", line)
        self.assertIn("as long as the median rank between collectives", line)
        self.assertIn(f"its cgroup {quota.path} was CPU-throttled for", line)
        port = re.search(r"health endpoint on http://([0-9.]+:\d+)/", err.text()).group(1)
        metrics = urllib.request.urlopen(f"http://{port}/metrics", timeout=10).read().decode()
        self.assertIn('cxxrun_rank_straggler{local_rank="3",rank="3"} 1', metrics)
        self.assertIn('cxxrun_rank_straggler{local_rank="0",rank="0"} 0', metrics)
        # Sampled state R: a task of a throttled cgroup stays R, so a window
        # spent inside one slow step is 1 (the fresh-clone CI run saw that).
        self.assertRegex(metrics, r'cxxrun_rank_running_share\{local_rank="3",rank="3"\} (0\.[5-9]|1\n)')
        self.assertIn("cxxrun_node_straggler 0", metrics)
        self.stop_job([p])
        for r in (0, 1, 2):
            self.assertIsNone(err.first(f"straggler: rank {r} on"), err.text())
        with open(events) as f:
            named = [json.loads(json.loads(l)["metadata"]["metadata"]) for l in f if "cxxrun.agent.STRAGGLER" in l]
        self.assertEqual(named[0]["state"], "named")
        self.assertEqual((named[0]["scope"], named[0]["rank"], named[0]["signal"], named[0]["cause"]),
                         ("rank", 3, "compute", "cgroup-throttle"))
        # The compute rule names a rank at 1.3x the others' running share
        # (docs/stragglers.md); how far above that a 0.2-CPU quota lands
        # depends on how busy the machine's other CPUs are (1.34 on one CI run).
        self.assertGreaterEqual(named[0]["ratio"], 1.3)

    def test_a_node_whose_workers_are_all_throttled_is_named(self):
        port = free_port()
        server = subprocess.Popen([RDZV_SERVER, f"--port={port}"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (server.kill(), server.wait(timeout=10)))
        run_id = uuid.uuid4().hex[:12]
        agents = [self.agent(["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={run_id}",
                              "--nnodes=2", "--nproc-per-node=2", LOCKSTEP]) for _ in range(2)]
        # Node rank 1 runs ranks 2 and 3.
        settle_then_throttle(self, self.dir, [2, 3])
        named = "straggler: node " + socket.gethostname() + " (node rank 1, ranks 2-3) computes"
        wait_for(lambda: all(err.first(named) for _, err in agents), timeout=NAMED_IN_TESTS,
                 what="node rank 1 to be named on both nodes after its quota")
        for _, err in agents:
            line = err.first(named)[1]
            self.assertIn("as long as the median node between collectives; its cgroup was CPU-throttled for", line)
        self.stop_job([p for p, _ in agents])
        for _, err in agents:
            self.assertIsNone(err.first("straggler: node " + socket.gethostname() + " (node rank 0"), err.text())


if __name__ == "__main__":
    unittest.main()
