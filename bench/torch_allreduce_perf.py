# torch.distributed gloo allreduce, timed the way examples/allreduce_perf
# times cxxrun's: float32 sum in place, warmup then timed iterations, mean
# time per iteration of the slowest rank. Run under a launcher:
#   cxxrun --standalone --nproc-per-node=4 bench/torch_allreduce_perf.py MIN MAX ITERS WARMUP
import sys
import time

import torch
import torch.distributed as dist

lo, hi, iters, warmup = (int(a) for a in sys.argv[1:5])
dist.init_process_group("gloo")
rank, n = dist.get_rank(), dist.get_world_size()
size = lo
while size <= hi:
    t = torch.zeros(size // 4, dtype=torch.float32)
    for _ in range(warmup):
        dist.all_reduce(t)
    dist.barrier()
    start = time.perf_counter()
    for _ in range(iters):
        dist.all_reduce(t)
    elapsed = torch.tensor([(time.perf_counter() - start) / iters])
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    if rank == 0:
        algbw = size / elapsed.item() / 1e9
        print(f"{size} {elapsed.item() * 1e6:.2f} {algbw:.3f} {algbw * 2 * (n - 1) / n:.3f}", flush=True)
    size *= 2
dist.destroy_process_group()
