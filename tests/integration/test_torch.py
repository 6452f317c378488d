"""Unmodified torch programs under cxxrun, with the flags a torchrun user
types: Debian's torch 1.13 by default, another torch through
CXXRUN_TORCH_PYTHON (harness.TORCH_PYTHON). Skipped when that python cannot
import torch; the NCCL test also when it sees no CUDA device.

The whole file runs once per start method (tests/CMakeLists.txt):
CXXRUN_TEST_START_METHOD=forkserver gives every job PET_START_METHOD, so
the same programs must behave the same when forked from the forkserver."""
import os
import re
import signal
import time
import unittest
import uuid

from harness import (TORCH_PYTHON, TempDirTest, clean_env, end, free_port, run, start, summary_blocks,
                     torch_importable, wait_for)

JOBS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_jobs")
START_METHOD = os.environ.get("CXXRUN_TEST_START_METHOD", "spawn")


def torch_env(**extra):
    return clean_env(PYTHON_EXEC=TORCH_PYTHON, PET_START_METHOD=START_METHOD, **extra)


@unittest.skipUnless(torch_importable(), f"torch is not importable by {TORCH_PYTHON}")
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

    def test_restart_gets_a_fresh_workers_store(self):
        # torch 2.x workers use the agent's store with no attempt prefix:
        # each attempt must find it empty (and on the same MASTER_PORT).
        script = os.path.join(self.dir, "stale.py")
        with open(script, "w") as f:
            f.write("""
import datetime, os, sys
import torch.distributed as dist
s = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), is_master=False,
                  timeout=datetime.timedelta(seconds=30))
attempt = os.environ["TORCHELASTIC_RESTART_COUNT"]
try:  # wait, not check(): torch 1.13's python TCPStore has no check
    s.wait(["left_by_attempt_0"], datetime.timedelta(milliseconds=300))
    found = True
except RuntimeError:
    found = False
print(f"attempt {attempt} port {os.environ['MASTER_PORT']} stale={found}", flush=True)
if attempt == "0":
    s.set("left_by_attempt_0", "x")
    sys.exit(1)
""")
        rc, out, err = run(["--nproc-per-node=1", "--max-restarts=1", script], env=torch_env(), timeout=120)
        self.assertEqual(rc, 0, err)
        seen = re.findall(r"attempt (\d) port (\d+) stale=(\w+)", out)
        self.assertEqual([(a, st) for a, _, st in seen], [("0", "False"), ("1", "False")], out)
        self.assertEqual(seen[0][1], seen[1][1], "MASTER_PORT stays the same across attempts")

    def test_dataloader_worker_processes(self):
        rc, out, err = run(["--standalone", "--nproc-per-node=2", f"{JOBS}/features.py", "--mode", "dataloader"],
                           env=torch_env(), timeout=240)
        self.assertEqual(rc, 0, err)
        # 0 + 1 + 4 + ... + 225 = 1240 on each rank; two loader processes each.
        self.assertEqual(sorted(re.findall(r"rank (\d) loader sum 1240 all 2480 loader processes 2", out)),
                         ["0", "1"], out)

    def test_torchelastic_environment(self):
        rc, out, err = run(["--nproc-per-node=2", "--max-restarts=3", "--rdzv-id=envjob",
                            f"{JOBS}/features.py", "--mode", "env"], env=torch_env(), timeout=240)
        self.assertEqual(rc, 0, err)
        lines = sorted(l.split(":", 1)[1] for l in out.splitlines() if ":env " in l)
        common = ("GROUP_RANK=0 ROLE_RANK={r} WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 ROLE_WORLD_SIZE=2 ROLE_NAME=default "
                  "MASTER_ADDR=127.0.0.1 TORCHELASTIC_RESTART_COUNT=0 TORCHELASTIC_MAX_RESTARTS=3 "
                  "TORCHELASTIC_RUN_ID=envjob TORCHELASTIC_USE_AGENT_STORE=True OMP_NUM_THREADS=1 "
                  "error_file_per_rank=True threads=1")
        self.assertEqual(lines, [f"env RANK={r} LOCAL_RANK={r} " + common.format(r=r) for r in range(2)])

    def test_record_writes_the_error_file_the_summary_shows(self):
        rc, out, err = run(["--standalone", "--nproc-per-node=2", f"{JOBS}/features.py", "--mode", "record"],
                           env=torch_env(), timeout=240)
        self.assertEqual(rc, 1, err)
        _, root = summary_blocks(err)
        self.assertIn("rank      : 1 (local_rank: 1)", root)
        self.assertIn("ValueError: recorded failure on rank 1", root)
        self.assertIn("exitcode  : 1", root)

    def test_sigterm_reaches_every_worker(self):
        ready = os.path.join(self.dir, "ready")
        os.mkdir(ready)
        p = start(["--standalone", "--nproc-per-node=2", f"{JOBS}/features.py", "--mode", "sigterm",
                   "--ready-dir", ready], env=torch_env())
        try:
            wait_for(lambda: len(os.listdir(ready)) == 2, timeout=120, what="both workers handle SIGTERM")
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=60)
        finally:
            end(p)
        self.assertEqual(p.returncode, 128 + signal.SIGTERM, err)
        # The agent's stop sends SIGTERM too: a handler may run twice.
        self.assertEqual(set(re.findall(r"rank (\d) got SIGTERM", out)), {"0", "1"}, out + err)

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


@unittest.skipUnless(torch_importable(check="torch.cuda.is_available() and torch.distributed.is_nccl_available()"),
                     f"{TORCH_PYTHON} has no torch with CUDA and NCCL, or sees no GPU")
class TorchNccl(TempDirTest):
    def test_ddp_nccl_one_worker_per_gpu(self):
        # NCCL wants a GPU per rank; the GPU machine has one.
        ckpt = os.path.join(self.dir, "ckpt.pt")
        rc, out, err = run(["--standalone", "--nproc-per-node=gpu", f"{JOBS}/ddp_train.py", "--checkpoint", ckpt,
                            "--backend", "nccl"], env=torch_env(), timeout=300)
        self.assertEqual(rc, 0, err)
        losses = [float(m) for m in re.findall(r"epoch \d loss ([0-9.]+) on cuda", out)]
        self.assertEqual(len(losses), 2, out)
        self.assertLess(losses[-1], losses[0])
