"""A failing rank stops the others; the exit code and summary are right."""
import json
import os
import re
import signal
import unittest
import uuid

from harness import (EXAMPLES, TORCH_PYTHON, TempDirTest, alive, clean_env, finish_all, free_port, read_pids, run,
                     start, summary_blocks, torch_importable)

# The common teardown pattern: every rank closes its process group in a
# `finally`, so rank 3's own error closes the Gloo pairs before its traceback
# (or @record's error file) is out, and its peers fail first with "Connection
# closed by peer". Rank 3's teardown is a little slower (it writes a crash
# report after the group is closed): its peers' failures are always seen
# first. Its error is a shape error raised inside torch.
TEARDOWN = """
import os, time
import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record


# The rank that fails: rank 3, or with FAIL_ON=alone the one worker of a node.
FAILS = os.environ["RANK"] == "3" if os.environ.get("FAIL_ON") != "alone" else os.environ["LOCAL_WORLD_SIZE"] == "1"


def train():
    dist.init_process_group("gloo")
    model = torch.nn.Linear(20, 4)
    t = torch.ones(4)
    for step in range(1000):
        if FAILS and step == 3:
            model(torch.ones(8, 10))
        dist.all_reduce(t)


def main():
    try:
        train()
    finally:
        dist.destroy_process_group()
        if FAILS:
            time.sleep(0.5)  # its crash report


if os.environ.get("USE_RECORD") == "1":
    main = record(main)
main()
"""


class FailureReport(TempDirTest):
    def test_failing_rank_stops_the_others(self):
        worker = self.script("w.sh", f"""
echo $$ > {self.dir}/pid.$LOCAL_RANK
if [ "$RANK" = 2 ]; then
  while [ $(ls {self.dir} | grep -c '^pid\\.') -lt 4 ]; do sleep 0.01; done
  echo "about to fail" >&2
  echo "bad state in rank 2" >&2
  exit 7
fi
exec sleep 60
""")
        rc, out, err = run(["--nproc-per-node=4", worker], timeout=30)
        self.assertEqual(rc, 7, err)
        self.assertIn("FAILED", err)
        self.assertIn("rank      : 2 (local_rank: 2)", err)
        self.assertIn("exitcode  : 7", err)
        self.assertIn("bad state in rank 2", err)
        self.assertIn("<NO_OTHER_FAILURES>", err)
        for pid in read_pids(self.dir, "pid."):
            self.assertFalse(alive(pid), f"worker {pid} still alive")

    def test_signal_death_reported_as_128_plus_signal(self):
        worker = self.script("w.sh", '[ "$RANK" = 1 ] && kill -SEGV $$; exec sleep 60\n')
        rc, out, err = run(["--nproc-per-node=2", worker], timeout=30)
        self.assertEqual(rc, 128 + signal.SIGSEGV, err)
        self.assertIn("SIGSEGV", err)
        self.assertIn(f"Signal {int(signal.SIGSEGV)} (SIGSEGV) received by PID", err)

    def test_error_file_message_in_summary(self):
        rc, out, err = run(["--nproc-per-node=3", os.path.join(EXAMPLES, "pi"), "--samples", "1000",
                            "--fail-rank", "1"], timeout=30)
        self.assertEqual(rc, 1, err)
        self.assertIn("traceback : rank 1 failed on purpose (--fail-rank)", err)
        self.assertRegex(err, r"error_file: \S+/attempt_0/1/error\.json")

    def test_python_style_error_file_callstack(self):
        worker = self.script("w.sh", """
cat > "$TORCHELASTIC_ERROR_FILE" <<'JSON'
{"message": {"message": "ValueError: boom", "extraInfo": {"py_callstack": "Traceback (most recent call last):\\n  File x\\nValueError: boom", "timestamp": "1795361529"}}}
JSON
exit 1
""")
        rc, out, err = run(["--nproc-per-node=1", worker], timeout=30)
        self.assertEqual(rc, 1, err)
        self.assertIn("traceback : Traceback (most recent call last):\n    File x\n  ValueError: boom", err)

    def test_failure_still_tearing_down_when_a_peer_fails_is_the_root_cause(self):
        # Rank 1 fails first (its error file is written) but is still alive when
        # rank 0, its victim, exits: what the example trainer does when a peer's
        # collective sees the reset. Rank 1 then dies of our SIGTERM, and is
        # still the root cause; the job exits with rank 0's own code.
        worker = self.script("w.sh", f"""
if [ "$RANK" = 1 ]; then
  echo '{{"message": {{"message": "rank 1 broke first", "extraInfo": {{"timestamp": "1795361529"}}}}}}' \
    > "$TORCHELASTIC_ERROR_FILE"
  touch {self.dir}/rank1.failed
  exec sleep 60
fi
while [ ! -e {self.dir}/rank1.failed ]; do sleep 0.01; done
sleep 0.1
echo "rank 0 lost its peer" >&2
exit 3
""")
        for flags in ([], ["--standalone"]):
            with self.subTest(flags=flags):
                marker = os.path.join(self.dir, "rank1.failed")
                if os.path.exists(marker):
                    os.unlink(marker)
                rc, out, err = run([*flags, "--nproc-per-node=2", worker], timeout=30)
                self.assertEqual(rc, 3, err)
                others, root = summary_blocks(err)
                self.assertIn("rank      : 1 (local_rank: 1)", root)
                self.assertIn("traceback : rank 1 broke first", root)
                self.assertIn("exitcode  : -15 (SIGTERM from cxxrun, after this failure)", root)
                self.assertIn("exitcode  : 3", others)
                self.assertIn("rank 0 lost its peer", others)

    def test_success_exits_zero_without_summary(self):
        rc, out, err = run(["--nproc-per-node=4", os.path.join(EXAMPLES, "pi"), "--samples", "4000"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(len(out.splitlines()), 4)
        self.assertNotIn("FAILED", err)

    def test_exec_failure_is_reported(self):
        # Passes the launcher's checks (it is a file with a shebang), fails at exec.
        worker = self.script("w.sh", "")
        with open(worker, "w") as f:
            f.write("#!/nonexistent/interpreter\n")
        rc, out, err = run(["--nproc-per-node=2", worker], timeout=30)
        self.assertEqual(rc, 127, err)
        self.assertIn("cannot execute", err)
        # It never had a pid: the summary says so rather than "pid: 0".
        self.assertIn("exitcode  : 127 (pid: not started)", err)
        self.assertNotIn("pid: 0", err)


@unittest.skipUnless(torch_importable(), f"torch is not importable by {TORCH_PYTHON}")
class ConsequenceIsNotTheCause(TempDirTest):
    """A communication error that follows a peer's failure is never the root
    cause: the group waits a bounded window for the failure it follows, and a
    rank exiting on its own is not killed before its traceback is out."""

    def test_finally_destroy_process_group_blames_the_rank_that_raised(self):
        script = os.path.join(self.dir, "teardown.py")
        with open(script, "w") as f:
            f.write(TEARDOWN)
        line = TEARDOWN.splitlines().index("            model(torch.ones(8, 10))") + 1
        for record in ("1", "0"):
            with self.subTest(record=record):
                rc, out, err = run(["--nproc-per-node=4", script], timeout=240,
                                   env=clean_env(PYTHON_EXEC=TORCH_PYTHON, USE_RECORD=record))
                self.assertEqual(rc, 1, err)
                others, root = summary_blocks(err)
                self.assertIn("rank      : 3 (local_rank: 3)", root)
                self.assertIn("RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x10 and 20x4); in its own "
                              f"code at {script}:{line} in train: model(torch.ones(8, 10))", " ".join(root.split()))
                self.assertRegex(others, r"Connection (closed|reset) by peer")
                self.assertNotIn("from cxxrun", root)  # it ended on its own, not by our stop

    def test_a_rank_stopped_while_exiting_after_its_traceback_is_listed_and_blamed(self):
        # Rank 3 raises; its exit then hangs in an atexit handler past the
        # window, and the group's SIGTERM ends it. Its peers fail first, with
        # the communication error they see. Its traceback was out before the
        # stop: it is listed, and it is the root cause.
        script = os.path.join(self.dir, "slow_exit.py")
        with open(script, "w") as f:
            f.write(f"""
import atexit, os, time
marker = os.path.join({self.dir!r}, "raised")
if os.environ["RANK"] == "3":
    atexit.register(time.sleep, 30)
    open(marker, "w").close()
    time.sleep(0.3)
    raise ValueError("rank 3 lost its way")
while not os.path.exists(marker):
    time.sleep(0.01)
raise RuntimeError("[../gloo/transport/tcp/pair.cc:598] Connection closed by peer [127.0.0.1]:1234")
""")
        rc, out, err = run(["--nproc-per-node=4", script], timeout=120)
        self.assertEqual(rc, 1, err)
        others, root = summary_blocks(err)
        self.assertIn("rank      : 3 (local_rank: 3)", root)
        self.assertIn("exitcode  : -15 (SIGTERM from cxxrun, after this failure)", root)
        self.assertIn("cause     : exception: it reported an error, then SIGTERM from cxxrun stopped it: ValueError: "
                      f"rank 3 lost its way; in its own code at {script}:8 in <module>", root)
        self.assertIn("had failed (its traceback is out) and was stopped with SIGTERM", err)
        for rank in range(3):
            self.assertIn(f"rank      : {rank} (local_rank: {rank})", others)

    def test_a_peers_communication_error_on_another_node_does_not_stop_the_rank_that_raised(self):
        # Node b's one worker raises; node a's three see the connections close
        # and fail first. Node b must not stop its worker when it hears of
        # them before the worker's own error is out.
        script = os.path.join(self.dir, "teardown.py")
        with open(script, "w") as f:
            f.write(TEARDOWN)
        port, run_id = free_port(), uuid.uuid4().hex[:10]
        common = ["--nnodes=2", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={run_id}"]
        env = clean_env(PYTHON_EXEC=TORCH_PYTHON, USE_RECORD="1", FAIL_ON="alone")
        agents = [start(common + ["--nproc-per-node=3", script], env=env),
                  start(common + ["--nproc-per-node=1", script], env=env)]
        for (rc, out, err), name in zip(finish_all(self, agents, timeout=240), ("a", "b")):
            self.assertEqual(rc, 1, f"node {name}: {err}")
            others, root = summary_blocks(err)
            self.assertIn("RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x10 and 20x4)", root,
                          f"node {name}: {err}")
            self.assertRegex(others, r"Connection (closed|reset) by peer")
