"""Unmodified torch programs (Debian's torch 1.13) under cxxrun, with the flags
a torchrun user types. Skipped when /usr/bin/python3 cannot import torch."""
import os
import re
import subprocess
import time
import unittest
import uuid

from harness import TempDirTest, clean_env, free_port, run, start

JOBS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_jobs")


def torch_importable():
    try:
        return subprocess.run(["/usr/bin/python3", "-c", "import torch.distributed"], capture_output=True,
                              timeout=120).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False



def torch_env(**extra):
    return clean_env(PYTHON_EXEC="/usr/bin/python3", **extra)


@unittest.skipUnless(torch_importable(), "torch is not importable by /usr/bin/python3")
class TorchJobs(TempDirTest):
    def test_gloo_allreduce_four_workers_agent_store(self):
        rc, out, err = run(["--standalone", "--nproc-per-node=4", f"{JOBS}/allreduce.py"], env=torch_env(),
                           timeout=240)
        self.assertEqual(rc, 0, err)
        lines = sorted(l.split(":", 1)[1] for l in out.splitlines() if "sum" in l)
        self.assertEqual(lines, [f"rank {r}/4 sum 10 store_shared=True" for r in range(4)])

    def test_gloo_allreduce_worker_rank0_hosts_the_store(self):
        rc, out, err = run(["--standalone", "--nproc-per-node=2", f"{JOBS}/allreduce.py"],
                           env=torch_env(TORCH_DISABLE_SHARE_RDZV_TCP_STORE="1"), timeout=240)
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.count("sum 3 store_shared=False"), 2)

    def test_ddp_two_epochs(self):
        ckpt = os.path.join(self.dir, "ckpt.pt")
        rc, out, err = run(["--standalone", "--nproc-per-node=2", f"{JOBS}/ddp_train.py", "--checkpoint", ckpt],
                           env=torch_env(), timeout=240)
        self.assertEqual(rc, 0, err)
        self.assertIn("epoch 1 loss", out)
        losses = [float(m) for m in re.findall(r"epoch \d loss ([0-9.]+)", out)]
        self.assertLess(losses[-1], losses[0])

    def test_crash_at_step_5_resumes_from_checkpoint(self):
        ckpt = os.path.join(self.dir, "ckpt.pt")
        # 512 samples / 4 ranks / batch 32 = 4 steps an epoch: step 5 is in epoch 1.
        rc, out, err = run(["--standalone", "--nproc-per-node=4", "--max-restarts=1", f"{JOBS}/ddp_train.py",
                            "--checkpoint", ckpt, "--epochs", "3", "--crash-rank", "2", "--crash-step", "5"],
                           env=torch_env(), timeout=300)
        self.assertEqual(rc, 0, err)
        self.assertIn("rank 2 crashes at step 5", err)
        self.assertIn("resumed from epoch 0", out)
        self.assertIn("epoch 2 loss", out)

    def test_two_agents_c10d(self):
        port, run_id = free_port(), uuid.uuid4().hex[:10]
        argv = ["--nnodes=2", "--nproc-per-node=2", "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                f"--rdzv-id={run_id}", f"{JOBS}/allreduce.py"]
        first = start(argv, env=torch_env())
        time.sleep(0.3)
        second = start(argv, env=torch_env())
        outs = []
        for p in (first, second):
            try:
                out, err = p.communicate(timeout=240)
            finally:
                p.kill()
            self.assertEqual(p.returncode, 0, err)
            outs.append(out)
        lines = sorted(l.split(":", 1)[1] for o in outs for l in o.splitlines() if "sum" in l)
        self.assertEqual(lines, [f"rank {r}/4 sum 10 store_shared=True" for r in range(4)])
