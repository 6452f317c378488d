"""Progress tracked per attempt (docs/restarts.md, agent/progress/): an output
line matching --progress-pattern, a new entry in --checkpoint-dir, a step the
program reports (cxxrun.step()); when an attempt's group stops, one line says
its progress, and the event log's cxxrun.agent.ATTEMPT_PROGRESS the same."""
import json
import os
import re

from harness import TempDirTest, clean_env, run

# Attempt n prints steps 1..3+2n, a tenth of a second apart, then fails.
STEPS_THEN_FAIL = """
last=$((3 + 2 * TORCHELASTIC_RESTART_COUNT))
echo "warming up"
for i in $(seq 1 $last); do sleep 0.1; echo "epoch 0 step $i loss 0.5"; done
exit 1
"""


def attempt_lines(err):
    """The agent's lines about attempts' progress, from "attempt N: " on."""
    found = (re.search(r"\battempt \d+: .*", line) for line in err.splitlines())
    return [m.group(0) for m in found if m]


def events(path, name="cxxrun.agent.ATTEMPT_PROGRESS"):
    with open(path) as f:
        found = [json.loads(line) for line in f if line.strip()]
    return [json.loads(e["metadata"]["metadata"]) | {"duration_ms": e["metadata"]["duration_ms"]}
            for e in found if e["name"] == name]


class Progress(TempDirTest):
    def test_each_attempt_says_the_step_its_output_reached(self):
        prog = self.script("steps.sh", STEPS_THEN_FAIL)
        log = os.path.join(self.dir, "events.jsonl")
        rc, out, err = run(["--nproc-per-node=2", "--max-restarts=1", r"--progress-pattern=step (\d+)",
                            f"--event-log={log}", prog], timeout=90)
        self.assertEqual(rc, 1, err)
        lines = attempt_lines(err)
        self.assertEqual(len(lines), 2, err)
        self.assertRegex(lines[0], r"attempt 0: first progress \d+\.\d s after start; reached step 3 \([\d.]+ steps/s\)$")
        self.assertRegex(lines[1], r"attempt 1: first progress \d+\.\d s after start; reached step 5 \([\d.]+ steps/s\)$")
        # Said before the restart it explains.
        self.assertLess(err.index("attempt 0: "), err.index("restarting, attempt 1"))
        progress = events(log)
        self.assertEqual([(e["attempt"], e["step"], e["step_source"]) for e in progress],
                         [(0, 3, "output"), (1, 5, "output")])
        for e in progress:
            self.assertGreaterEqual(e["step_ms"], e["first_progress_ms"])
            self.assertGreater(e["steps_per_s"], 0)
            self.assertGreaterEqual(e["duration_ms"], e["step_ms"])

    def test_the_last_checkpoint_is_reported(self):
        ckpt = os.path.join(self.dir, "ckpt")  # the job makes it
        prog = self.script("ckpt.sh", f"""
mkdir -p {ckpt}
sleep 0.3; echo x > {ckpt}/ckpt-000010.pt
sleep 0.3; mkdir {ckpt}/step_20
sleep 0.5
exit 3
""")
        log = os.path.join(self.dir, "events.jsonl")
        rc, out, err = run(["--nproc-per-node=1", f"--checkpoint-dir={ckpt}", f"--event-log={log}", prog],
                           timeout=60)
        self.assertEqual(rc, 3, err)
        lines = attempt_lines(err)
        self.assertEqual(len(lines), 1, err)
        self.assertRegex(lines[0], r"attempt 0: first progress \d+\.\d s after start; reached step 20\b.*; "
                                   r"last checkpoint step 20, \d+\.\d s before the end$")
        [e] = events(log)
        self.assertEqual((e["checkpoints"], e["checkpoint"], e["checkpoint_step"], e["step_source"]),
                         (2, "step_20", 20, "checkpoint"))

    def test_checkpoints_there_before_the_attempt_do_not_count(self):
        ckpt = os.path.join(self.dir, "ckpt")
        os.makedirs(os.path.join(ckpt, "step_90"))
        prog = self.script("ok.sh", "sleep 0.5\n")
        rc, out, err = run(["--nproc-per-node=1", f"--checkpoint-dir={ckpt}", prog], timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertRegex(" ".join(attempt_lines(err)), r"^attempt 0: no progress in \d+\.\d s$")

    def test_the_step_the_program_reports_needs_no_flag(self):
        path = os.path.join(self.dir, "w.py")
        with open(path, "w") as f:
            f.write("import time\nimport cxxrun\n"
                    "for n in range(1, 8):\n    cxxrun.step(n)\n    time.sleep(0.1)\n")
        rc, out, err = run(["--nproc-per-node=2", path], timeout=60)
        self.assertEqual(rc, 0, err)
        lines = attempt_lines(err)
        self.assertEqual(len(lines), 1, err)
        self.assertRegex(lines[0], r"attempt 0: first progress \d+\.\d s after start; reached step 7")

    def test_untracked_jobs_say_nothing_new(self):
        prog = self.script("steps.sh", "echo step 3\n")
        rc, out, err = run(["--nproc-per-node=1", prog], timeout=60)
        self.assertEqual(rc, 0, err)
        self.assertEqual(attempt_lines(err), [], err)

    def test_a_bad_pattern_is_one_line_and_exit_2(self):
        prog = self.script("ok.sh", "exit 0\n")
        for args, env, shown in ((["--progress-pattern=step ("], None, "--progress-pattern=step ("),
                                 ([], clean_env(PET_PROGRESS_PATTERN="step ("), "PET_PROGRESS_PATTERN=step (")):
            rc, out, err = run(args + [prog], env=env, timeout=30)
            lines = [line for line in err.splitlines() if line.strip()]
            self.assertEqual(rc, 2, err)
            self.assertEqual(len(lines), 1, err)
            self.assertTrue(lines[0].startswith(f"cxxrun: error: {shown}: is not a valid regular expression"),
                            lines[0])
            self.assertEqual(out, "")

    def test_a_checkpoint_dir_that_is_a_file_is_refused(self):
        prog = self.script("ok.sh", "exit 0\n")
        rc, out, err = run([f"--checkpoint-dir={prog}", prog], timeout=30)
        self.assertEqual(rc, 2, err)
        self.assertIn("exists and is not a directory", err)
        self.assertEqual(len([line for line in err.splitlines() if line.strip()]), 1, err)


if __name__ == "__main__":
    import unittest
    unittest.main()
