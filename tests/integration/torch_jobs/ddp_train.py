# A DDP training loop with DistributedSampler (gloo, or nccl with one GPU per
# local rank): a small regression on a seeded data set, checkpointed each
# epoch by rank 0 and resumed after a restart. --crash-rank R --crash-step S makes rank R exit at global step S on
# the first attempt only.
import argparse
import os

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

p = argparse.ArgumentParser()
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--checkpoint", required=True)
p.add_argument("--crash-rank", type=int, default=-1)
p.add_argument("--crash-step", type=int, default=-1)
p.add_argument("--backend", choices=["gloo", "nccl"], default="gloo")
args = p.parse_args()

device = torch.device("cpu")
if args.backend == "nccl":
    device = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
    torch.cuda.set_device(device)
dist.init_process_group(args.backend)
rank, world = dist.get_rank(), dist.get_world_size()
attempt = int(os.environ["TORCHELASTIC_RESTART_COUNT"])
torch.manual_seed(0)
x = torch.randn(512, 8)
y = x @ torch.arange(1.0, 9.0).unsqueeze(1) + 0.1 * torch.randn(512, 1)
data = TensorDataset(x, y)
sampler = DistributedSampler(data, num_replicas=world, rank=rank, shuffle=True, seed=1)
loader = DataLoader(data, batch_size=32, sampler=sampler)
model = DDP(torch.nn.Linear(8, 1).to(device), device_ids=[device.index] if device.type == "cuda" else None)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
start_epoch = 0
if os.path.exists(args.checkpoint):
    state = torch.load(args.checkpoint, map_location=device)
    model.module.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start_epoch = state["epoch"] + 1
    print(f"rank {rank}: resumed from epoch {state['epoch']}", flush=True)
step = start_epoch * len(loader)
for epoch in range(start_epoch, args.epochs):
    sampler.set_epoch(epoch)
    for xb, yb in loader:
        xb, yb = xb.to(device), yb.to(device)
        if attempt == 0 and rank == args.crash_rank and step == args.crash_step:
            raise SystemExit(f"rank {rank} crashes at step {step}")
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        loss.backward()
        opt.step()
        step += 1
    if rank == 0:
        torch.save({"model": model.module.state_dict(), "opt": opt.state_dict(), "epoch": epoch},
                   args.checkpoint + ".tmp")
        os.replace(args.checkpoint + ".tmp", args.checkpoint)
        print(f"epoch {epoch} loss {loss.item():.4f} on {device.type}", flush=True)
    dist.barrier()
dist.destroy_process_group()
