# A synchronous CPU job for the straggler tests (test_straggler.py): each
# step computes about STEP_MS of matrix products, then all-reduces, so every
# rank waits in the collective for the slowest. Each rank writes its pid to
# $PID_DIR/pid.<rank> (so that a test can throttle it) and prints "step N";
# the job ends, everyone at the same step, once $PID_DIR/stop exists or
# after MAX_SECONDS: rank 0's flag travels in the all-reduce itself.
# SYNC=0: no collective in the loop (each rank steps at its own rate, and
# stops on its own at the same signs).
import os
import time

import torch
import torch.distributed as dist

torch.set_num_threads(1)
dist.init_process_group("gloo")
rank = dist.get_rank()
pid_dir = os.environ["PID_DIR"]
with open(os.path.join(pid_dir, f"pid.{rank}.tmp"), "w") as f:
    f.write(str(os.getpid()))
os.replace(os.path.join(pid_dir, f"pid.{rank}.tmp"), os.path.join(pid_dir, f"pid.{rank}"))

step_s = float(os.environ.get("STEP_MS", "40")) / 1000
limit = time.monotonic() + float(os.environ.get("MAX_SECONDS", "120"))
x = torch.randn(128, 128)
# How many products take step_s here, measured once (the same on every rank).
start, n = time.perf_counter(), 0
while time.perf_counter() - start < 0.2:
    x @ x
    n += 1
products = torch.tensor([max(1, int(n * step_s / 0.2))])
dist.all_reduce(products, op=dist.ReduceOp.MIN)
products = int(products.item())

sync = os.environ.get("SYNC", "1") != "0"
step = 0
while True:
    for _ in range(products):
        x @ x
    stop = float((rank == 0 or not sync) and (os.path.exists(os.path.join(pid_dir, "stop")) or time.monotonic() > limit))
    flag = torch.tensor([stop])
    if sync:
        dist.all_reduce(flag)
    print(f"step {step}", flush=True)
    step += 1
    if flag.item() > 0:
        break
if not sync:
    dist.barrier()
dist.destroy_process_group()
