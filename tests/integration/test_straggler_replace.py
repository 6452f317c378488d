"""--straggler-action=replace (docs/stragglers.md): a node named slow, with
a host cause, steps out for a spare that waits to join, through the
node-health path (exit 243, --exclude-file, NODE_UNHEALTHY), and the job
goes on with the spare at the same size; with no spare waiting it only
reports, until one comes. Agents on loopback, the job's store in cxxrun-rdzv (as on a
cluster: it outlives the node that leaves)."""
import json
import os
import socket
import subprocess
import unittest
import uuid

from harness import RDZV_SERVER, end, free_port, start, wait_for
from stragglers import LOCKSTEP, NAMED_WITHIN, Output, ThrottleTest, lockstep_env, settle_then_throttle

UNHEALTHY = 243


class Replace(ThrottleTest):
    def setUp(self):
        super().setUp()
        self.port = free_port()
        server = subprocess.Popen([RDZV_SERVER, f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (server.kill(), server.wait(timeout=10)))
        wait_for(self.listening, timeout=10, what="cxxrun-rdzv to listen")
        self.run_id = uuid.uuid4().hex[:12]
        self.exclude = os.path.join(self.dir, "exclude")
        self.events = os.path.join(self.dir, "events.jsonl")

    def listening(self):
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", self.port)) == 0

    def agent(self):
        p = start(["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{self.port}", f"--rdzv-id={self.run_id}",
                   "--nnodes=2", "--nproc-per-node=2", "--straggler-action=replace", f"--exclude-file={self.exclude}",
                   f"--event-log={self.events}", LOCKSTEP], env=lockstep_env(self.dir))
        self.addCleanup(end, p)
        return Output(p)

    def node_rank_1(self, agents):
        """The agent of node rank 1 (ranks 2 and 3) in the first round."""
        wait_for(lambda: all(a.first("starting 2 workers") for a in agents), timeout=60, what="both nodes' workers")
        [slow] = [a for a in agents if "ranks 2..3 of 4" in a.first("starting 2 workers")[1]]
        return slow

    # One job for both halves (they ran as two, 50 s apiece, in the suite's
    # serial phase): named with no spare, the node only reports, and it tries
    # again each window while it is named, so a spare that comes later takes
    # its place.
    def test_a_slow_node_only_reports_until_a_spare_waits_then_steps_out_for_it(self):
        first = [self.agent(), self.agent()]
        slow = self.node_rank_1(first)
        settle_then_throttle(self, self.dir, [2, 3])
        wait_for(lambda: slow.first("straggler: no spare waits to take this node's place"),
                 timeout=NAMED_WITHIN + 30, what="the slow node to find no spare")
        self.assertIsNotNone(slow.first(f"straggler: node {socket.gethostname()} (node rank 1, ranks 2-3)"))
        self.assertIsNone(slow.proc.poll(), slow.text())
        self.assertFalse(os.path.exists(self.exclude))
        spare = self.agent()
        wait_for(lambda: spare.first("waits as a spare"), timeout=60, what="the third node to wait as a spare")
        wait_for(lambda: slow.proc.poll() is not None, timeout=60, what="the slow node to step out")
        self.assertEqual(slow.proc.returncode, UNHEALTHY, slow.text())
        err = slow.text()
        self.assertIn(f"straggler: node {socket.gethostname()} (node rank 1, ranks 2-3) computes", err)
        self.assertIn("straggler: this node steps out for the spare waiting to join", err)
        self.assertIn("health check 'straggler' failed: straggler: node", err)
        with open(self.exclude) as f:
            self.assertEqual(f.read(), socket.gethostname() + "\n")
        # The job goes on with the spare: its workers step.
        wait_for(lambda: spare.stdout_first("step "), timeout=120, what="the spare's workers to run")
        open(os.path.join(self.dir, "stop"), "w").close()
        stay = [a for a in first if a is not slow][0]
        for a in (stay, spare):
            self.assertEqual(a.proc.wait(timeout=120), 0, a.text())
        with open(self.events) as f:
            names = [json.loads(line)["name"] for line in f]
        self.assertIn("cxxrun.agent.STRAGGLER", names)
        self.assertIn("cxxrun.agent.NODE_UNHEALTHY", names)


if __name__ == "__main__":
    unittest.main()
