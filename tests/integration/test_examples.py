"""The example programs as real multi-process jobs over Gloo: the collectives
add up, training converges and takes the same steps on 1 and 4 ranks, and a
failed attempt resumes from its checkpoint to the very same result."""
import os
import re
import subprocess
import tempfile
import unittest

from harness import EXAMPLES, TempDirTest, clean_env, run

# Bounds of one job, generous for a loaded 2-core machine running other tests.
JOB_TIMEOUT = 120
# 300 SGD steps at the default --lr 0.5 take the loss from 0.68 to 0.0048.
STEPS = 300
LOSS_BOUND = 0.01


def example(name):
    return os.path.join(EXAMPLES, name)


def final_loss(out):
    found = re.findall(r"^\[default0\]:final loss (\S+)$", out, re.M)
    if len(found) != 1:
        raise AssertionError(f"expected one 'final loss' line from rank 0, got {found}:\n{out}")
    return found[0]


class SumRanks(unittest.TestCase):
    def test_sum_of_ranks(self):
        for n in (1, 2, 4):
            with self.subTest(nproc=n):
                rc, out, err = run(["--standalone", f"--nproc-per-node={n}", example("sum_ranks")],
                                   timeout=JOB_TIMEOUT)
                self.assertEqual(rc, 0, err)
                self.assertEqual(re.findall(r"sum of ranks ok: (\d+)", out), [str(n * (n + 1) // 2)],
                                 "printed once, by rank 0")

    def test_outside_cxxrun_fails_clearly(self):
        env = {k: v for k, v in clean_env().items()
               if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")}
        p = subprocess.run([example("sum_ranks")], env=env, capture_output=True, text=True,
                           timeout=JOB_TIMEOUT, stdin=subprocess.DEVNULL)
        self.assertNotEqual(p.returncode, 0)
        self.assertIn("sum_ranks: environment:", p.stderr)


class Train(TempDirTest):
    @classmethod
    def setUpClass(cls):
        # The uninterrupted runs are shared by the tests that compare against them.
        cls._ckpt = tempfile.TemporaryDirectory(prefix="cxxrun_train_")
        cls.runs = {n: cls.train(n, os.path.join(cls._ckpt.name, f"n{n}")) for n in (1, 4)}

    @classmethod
    def tearDownClass(cls):
        cls._ckpt.cleanup()

    @staticmethod
    def train(nproc, ckpt_dir, *launcher_flags, steps=STEPS, extra=()):
        return run(["--standalone", f"--nproc-per-node={nproc}", *launcher_flags, example("train"),
                    "--steps", str(steps), "--checkpoint-every", "50", "--checkpoint-dir", ckpt_dir,
                    *extra], timeout=JOB_TIMEOUT)

    def test_converges(self):
        rc, out, err = self.runs[1]
        self.assertEqual(rc, 0, err)
        losses = [float(v) for v in re.findall(r"\]:step \d+ loss (\S+)", out)]
        self.assertEqual(len(losses), STEPS // 50, out)
        self.assertEqual(losses, sorted(losses, reverse=True), "loss falls at every log line")
        self.assertLess(float(final_loss(out)), LOSS_BOUND)

    def test_four_ranks_match_one(self):
        for n, (rc, out, err) in self.runs.items():
            self.assertEqual(rc, 0, f"{n} rank(s): {err}")
        one, four = float(final_loss(self.runs[1][1])), float(final_loss(self.runs[4][1]))
        self.assertAlmostEqual(one, four, delta=1e-6 * one)
        self.assertIn("on 4 rank(s)", self.runs[4][1])

    def test_checkpoint_written_atomically(self):
        ckpt_dir = os.path.join(self._ckpt.name, "n1")
        self.assertEqual(os.listdir(ckpt_dir), ["train.ckpt"], "no temporary file left behind")

    def test_restart_resumes_from_checkpoint(self):
        rc, out, err = self.train(4, os.path.join(self.dir, "ckpt"), "--max-restarts=1",
                                  extra=("--fail-at-step", "120", "--fail-rank", "2"))
        self.assertEqual(rc, 0, err)
        self.assertIn("failed on purpose at step 120", err)
        self.assertIn("[default0]:resumed from step 100", out)
        # Same world size and the same checkpointed bits: the same result to the last digit.
        self.assertEqual(final_loss(out), final_loss(self.runs[4][1]))

    def test_failure_without_restart_reaches_launcher(self):
        rc, out, err = self.train(2, os.path.join(self.dir, "ckpt"), steps=20,
                                  extra=("--fail-at-step", "5", "--fail-rank", "1"))
        self.assertNotEqual(rc, 0)
        self.assertNotIn("final loss", out)
        # Through the error file, the launcher's summary names the reason.
        self.assertRegex(err, r"error_file: \S+error\.json\n\s+traceback : rank 1: failed on purpose at step 5")


class AllreducePerf(unittest.TestCase):
    ROW = re.compile(r"^\[default0\]:\s+(\d+)\s+(\d+)\s+(\w+)\s+(\w+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)$",
                     re.M)

    def perf(self, nproc, *flags, max_bytes=65536):
        rc, out, err = run(["--standalone", f"--nproc-per-node={nproc}", example("allreduce_perf"),
                            "--min-bytes", "4096", "--max-bytes", str(max_bytes), "--iters", "5",
                            "--warmup", "2", *flags], timeout=JOB_TIMEOUT)
        self.assertEqual(rc, 0, err)
        self.assertIn("out of bounds values : 0 OK", out)
        return self.ROW.findall(out)

    def test_table_two_ranks(self):
        rows = self.perf(2)
        self.assertEqual([int(r[0]) for r in rows], [4096, 8192, 16384, 32768, 65536])
        for size, count, dtype, op, time_us, algbw, busbw, wrong in rows:
            self.assertEqual((int(count), dtype, op, wrong), (int(size) // 4, "float", "sum", "0"))
            self.assertGreater(float(time_us), 0)
            # n = 2: busbw = algbw * 2(n-1)/n = algbw.
            self.assertEqual(algbw, busbw)

    def test_avg_of_doubles_three_ranks(self):
        rows = self.perf(3, "--dtype", "double", "--op", "avg", max_bytes=8192)
        self.assertEqual(len(rows), 2)
        for row in rows:
            algbw, busbw = float(row[5]), float(row[6])
            self.assertAlmostEqual(busbw, algbw * 4 / 3, delta=0.002 + 0.001 * algbw)


if __name__ == "__main__":
    unittest.main()
