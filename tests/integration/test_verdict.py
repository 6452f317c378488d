"""Restart verdicts (docs/restarts.md, "When a restart helps";
agent/verdict/): a failure that repeats at the same step without progress
stops the job with exit code 245 and one line of evidence; failures that
move on restart up to --max-restarts; an OOM kill that repeats stops after
two; --restart-policy=always restarts blindly; the nodes of a job settle one
verdict from everything they saw; and a requeued agent continues the count
its log dir kept."""
import glob
import json
import os
import time
import unittest

from harness import TempDirTest, clean_env, finish_all, free_port, own_v1_cgroup, run, start
from test_death_causes import ALLOCATE_ON_RANK_1, ROOT, LimitedMemory

NO_PROGRESS = 245

# Fails at step 30 every attempt: NaN from a bad batch, same place, same
# step, after resuming from the step-0 checkpoint the first attempt wrote.
NAN_AT_30 = """
import os, sys, time
ckpt = os.environ.get("CKPT")
if ckpt and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
    os.makedirs(ckpt, exist_ok=True)
    open(os.path.join(ckpt, "ckpt-0.pt"), "w").close()
for step in range(1, 31):
    print(f"step {step} loss 0.5", flush=True)
    time.sleep(0.01)
time.sleep(0.3)
raise ValueError("loss is NaN")
"""

# Fails at another step each attempt, making progress each time.
MOVING_ON = """
import os, time
last = 10 + 7 * int(os.environ["TORCHELASTIC_RESTART_COUNT"])
for step in range(1, last + 1):
    print(f"step {step}", flush=True)
    time.sleep(0.01)
time.sleep(0.3)
raise RuntimeError("lost a data shard")
"""


def events(path, name="cxxrun.agent.VERDICT"):
    with open(path) as f:
        found = [json.loads(line) for line in f if line.strip()]
    return [json.loads(e["metadata"]["metadata"]) for e in found if e["name"] == name]


def restarts(err):
    return err.count("restarting, attempt ")


class Verdicts(TempDirTest):
    def launch(self, args, prog, env=None, timeout=120):
        return run(args + ["--no-python", "/usr/bin/python3", prog], env=env, timeout=timeout)

    def write(self, name, body):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(body)
        return path

    def test_the_same_failure_at_the_same_step_stops_after_three_attempts(self):
        prog = self.write("nan.py", NAN_AT_30)
        log = os.path.join(self.dir, "events.jsonl")
        rc, out, err = self.launch(["--nproc-per-node=1", "--max-restarts=10", r"--progress-pattern=step (\d+)",
                                    f"--checkpoint-dir={self.dir}/ckpt", f"--event-log={log}"], prog,
                                   env=clean_env(CKPT=f"{self.dir}/ckpt"))
        self.assertEqual(rc, NO_PROGRESS, err)
        self.assertEqual(restarts(err), 2, err)  # three attempts, not eleven
        self.assertIn("not restarting: 3 attempts in a row ended with ValueError: loss is NaN (nan.py:11) at step 30; "
                      "no progress beyond step 30 and no checkpoint since step 0", err)
        self.assertIn("exiting with code 245", err)
        self.assertIn("Root Cause", err)  # the summary still says what failed
        verdicts = events(log)
        self.assertEqual([(v["attempt"], v["verdict"], v["repeats"]) for v in verdicts],
                         [(0, "restart", 1), (1, "restart", 2), (2, "stop", 3)])
        self.assertEqual(verdicts[-1]["step"], 30)
        self.assertEqual(verdicts[-1]["checkpoint_step"], 0)

    def test_failures_that_move_on_restart_up_to_max_restarts(self):
        prog = self.write("moving.py", MOVING_ON)
        rc, out, err = self.launch(["--nproc-per-node=1", "--max-restarts=3", r"--progress-pattern=step (\d+)"], prog)
        self.assertEqual(rc, 1, err)
        self.assertEqual(restarts(err), 3, err)
        self.assertNotIn("not restarting", err)
        self.assertIn("verdict: restart: RuntimeError: lost a data shard (moving.py:8) at step 17, at another step than the last attempt; "
                      "progress beyond step 10",
                      err)

    def test_always_restarts_blindly(self):
        prog = self.write("nan.py", NAN_AT_30)
        rc, out, err = self.launch(["--nproc-per-node=1", "--max-restarts=4", r"--progress-pattern=step (\d+)",
                                    "--restart-policy=always"], prog)
        self.assertEqual(rc, 1, err)
        self.assertEqual(restarts(err), 4, err)
        self.assertNotIn("not restarting", err)

    def test_budgets_are_the_users(self):
        prog = self.write("nan.py", NAN_AT_30)
        rc, out, err = self.launch(["--nproc-per-node=1", "--max-restarts=9", r"--progress-pattern=step (\d+)"], prog,
                                   env=clean_env(PET_RESTART_POLICY="progress,same-cause=2"))
        self.assertEqual(rc, NO_PROGRESS, err)
        self.assertEqual(restarts(err), 1, err)
        self.assertIn("not restarting: 2 attempts in a row", err)

    def test_without_a_progress_source_failures_restart_as_torchrun(self):
        prog = self.write("nan.py", NAN_AT_30)
        rc, out, err = self.launch(["--nproc-per-node=1", "--max-restarts=3"], prog)
        self.assertEqual(rc, 1, err)
        self.assertEqual(restarts(err), 3, err)

    def test_a_requeued_agent_continues_the_count(self):
        prog = self.write("nan.py", NAN_AT_30)
        logs = os.path.join(self.dir, "logs")

        def once():
            port = free_port()
            return self.launch(["--nproc-per-node=1", "--max-restarts=1", r"--progress-pattern=step (\d+)",
                                "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=slurm-4242",
                                f"--log-dir={logs}"], prog)

        rc, out, err = once()  # two attempts: the budget ends it, 2 in a row so far
        self.assertEqual(rc, 1, err)
        self.assertEqual(restarts(err), 1, err)
        # Kept in the run's own directory: the log dir holds only run dirs.
        self.assertEqual(len(glob.glob(os.path.join(logs, "slurm-4242_*", "history.json"))), 1)
        self.assertTrue(all(os.path.isdir(p) for p in glob.glob(os.path.join(logs, "*"))))
        rc, out, err = once()  # the requeue: its first failure is the third in a row
        self.assertEqual(rc, NO_PROGRESS, err)
        self.assertEqual(restarts(err), 0, err)
        self.assertIn("continuing the restart history of job=slurm-4242", err)
        self.assertIn("not restarting: 3 attempts in a row ended with ValueError: loss is NaN (nan.py:11) at step 30",
                      err)

    def test_a_requeue_with_no_restarts_of_its_own_stops_with_245(self):
        # Slurm requeues a job that restarts nothing itself: each requeue is
        # one attempt, and the third identical one ends the requeues.
        prog = self.write("nan.py", NAN_AT_30)
        logs = os.path.join(self.dir, "logs")
        codes = []
        for _ in range(3):
            rc, out, err = self.launch(["--nproc-per-node=1", r"--progress-pattern=step (\d+)", "--rdzv-backend=c10d",
                                        f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--rdzv-id=slurm-77",
                                        f"--log-dir={logs}"], prog)
            codes.append(rc)
        self.assertEqual(codes, [1, 1, NO_PROGRESS], err)
        self.assertIn("not restarting: 3 attempts in a row", err)

    def test_bad_policies_are_refused(self):
        for args, env, shown in ((["--restart-policy=sometimes"], None, "--restart-policy=sometimes"),
                                 (["--restart-policy=progress,oom=0"], None, "--restart-policy=progress,oom=0"),
                                 ([], clean_env(PET_RESTART_POLICY="blind"), "PET_RESTART_POLICY")):
            rc, out, err = run(args + ["--nproc-per-node=1", "true"], env=env)
            self.assertEqual(rc, 2, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn(shown, err)


# Rank 0 (on the first node) prints the steps; rank 2 (on the second) raises
# at the same point every attempt. STEPS: how far rank 0 gets in attempt n.
TWO_NODES = """
import os, sys, time
rank = int(os.environ["RANK"])
n = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
if rank == 0:
    for step in range(1, STEPS + 1):
        print(f"step {step}", flush=True)
        time.sleep(0.01)
if rank == 2:
    time.sleep(1.5)
    raise ValueError("loss is NaN")
time.sleep(30)
"""


class TwoNodes(TempDirTest):
    def job(self, steps, max_restarts):
        prog = os.path.join(self.dir, "two.py")
        with open(prog, "w") as f:
            f.write(TWO_NODES.replace("STEPS", steps))
        port = free_port()
        common = ["--nnodes=2", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", "--rdzv-id=verdict",
                  f"--max-restarts={max_restarts}", r"--progress-pattern=step (\d+)", "--no-python", "/usr/bin/python3",
                  prog]
        # The first node starts first, so it is group rank 0 (ranks 0, 1).
        first = start(["--nproc-per-node=2"] + common)
        time.sleep(0.5)
        agents = [first, start(["--nproc-per-node=1"] + common)]
        return finish_all(self, agents, timeout=240)

    def test_the_nodes_agree_from_progress_only_one_of_them_saw(self):
        # Only the first node sees the steps; the second alone would judge
        # "no progress". Both stop, with the step the first one saw.
        results = self.job("30", max_restarts=6)
        for rc, out, err in results:
            self.assertEqual(rc, NO_PROGRESS, err)
            self.assertIn("not restarting: 3 attempts in a row ended with ValueError: loss is NaN (two.py:11) at "
                          "step 30; no progress beyond step 30", err)

    def test_progress_on_one_node_keeps_every_node_restarting(self):
        # Rank 0 gets further every attempt: the job moves on, though the
        # second node sees the same failure with no progress of its own.
        results = self.job("30 + 10 * n", max_restarts=3)
        for rc, out, err in results:
            self.assertEqual(rc, 1, err)
            self.assertNotIn("not restarting", err)
            self.assertEqual(restarts(err), 3, err)


@unittest.skipUnless(ROOT and own_v1_cgroup("memory"), "needs root and a cgroup v1 memory hierarchy")
class RepeatedOom(LimitedMemory):
    """Rank 1 allocates 400 MiB under a 128 MiB limit every attempt."""
    WORKER = ALLOCATE_ON_RANK_1

    def test_an_oom_kill_that_repeats_stops_after_two_attempts(self):
        rc, err = self.launch(["--nproc-per-node=2", "--max-restarts=5", "--no-python", "/usr/bin/python3",
                               self.worker])
        self.assertEqual(rc, NO_PROGRESS, err)
        self.assertEqual(restarts(err), 1, err)
        self.assertIn("not restarting: 2 attempts in a row ended with an OOM kill (limit 128 MiB); no progress seen",
                      err)

    def test_always_restarts_an_oom_to_the_budget_and_exits_241(self):
        rc, err = self.launch(["--nproc-per-node=2", "--max-restarts=2", "--restart-policy=always", "--no-python",
                               "/usr/bin/python3", self.worker])
        self.assertEqual(rc, 241, err)
        self.assertEqual(restarts(err), 2, err)


if __name__ == "__main__":
    unittest.main()
