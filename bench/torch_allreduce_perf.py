# torch.distributed allreduce, timed the way examples/allreduce_perf times
# cxxrun's: float32 sum in place, warmup then timed iterations, mean time per
# iteration of the slowest rank (on nccl the device is synchronised before the
# clock stops, as allreduce_perf's wait_device does). Run under a launcher:
#   cxxrun --standalone --nproc-per-node=4 bench/torch_allreduce_perf.py MIN MAX ITERS WARMUP [gloo|nccl]
# Prints "size time_us algbw busbw" per size from rank 0.
import os
import sys
import time

import torch
import torch.distributed as dist

lo, hi, iters, warmup = (int(a) for a in sys.argv[1:5])
backend = sys.argv[5] if len(sys.argv) > 5 else "gloo"
device = torch.device("cpu")
if backend == "nccl":
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
dist.init_process_group(backend)
rank, n = dist.get_rank(), dist.get_world_size()


def sync():
    if device.type == "cuda":
        torch.cuda.synchronize(device)


size = lo
while size <= hi:
    t = torch.zeros(size // 4, dtype=torch.float32, device=device)
    for _ in range(warmup):
        dist.all_reduce(t)
    sync()
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    sync()
    elapsed = torch.tensor([(time.perf_counter() - start) / iters], device=device)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    if rank == 0:
        algbw = size / elapsed.item() / 1e9
        print(f"{size} {elapsed.item() * 1e6:.2f} {algbw:.3f} {algbw * 2 * (n - 1) / n:.3f}", flush=True)
    size *= 2
dist.destroy_process_group()
