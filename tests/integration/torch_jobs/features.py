# What a torchrun user's program leans on besides collectives: DataLoader
# worker processes, torchelastic's environment, @record error files and
# SIGTERM. --mode picks one; each prints what the test checks.
import argparse
import os
import signal
import sys
import time

import torch
import torch.distributed as dist
from torch.distributed.elastic.multiprocessing.errors import record
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["dataloader", "env", "record", "sigterm"], required=True)
p.add_argument("--ready-dir", default="")
args = p.parse_args()


class Squares(Dataset):
    def __len__(self):
        return 16

    def __getitem__(self, i):
        return torch.tensor([float(i * i), float(os.getpid())])


def dataloader():
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    pids, total = set(), 0.0
    for batch in DataLoader(Squares(), batch_size=4, num_workers=2):
        total += batch[:, 0].sum().item()
        pids.update(int(x) for x in batch[:, 1].tolist())
    t = torch.tensor([total])
    dist.all_reduce(t)
    print(f"rank {rank} loader sum {total:.0f} all {t.item():.0f} loader processes {len(pids - {os.getpid()})}",
          flush=True)
    dist.destroy_process_group()


ENV = ["RANK", "LOCAL_RANK", "GROUP_RANK", "ROLE_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "ROLE_WORLD_SIZE",
       "ROLE_NAME", "MASTER_ADDR", "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID",
       "TORCHELASTIC_USE_AGENT_STORE", "OMP_NUM_THREADS"]


def env():
    values = " ".join(f"{k}={os.environ.get(k)}" for k in ENV)
    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE", "")
    print(f"env {values} error_file_per_rank={os.environ['LOCAL_RANK'] in error_file} "
          f"threads={torch.get_num_threads()}", flush=True)


@record
def fail_with_record():
    if os.environ["RANK"] == "1":
        raise ValueError("recorded failure on rank 1")


def sigterm():
    def on_term(sig, frame):
        print(f"rank {os.environ['RANK']} got SIGTERM", flush=True)
        sys.exit(7)

    signal.signal(signal.SIGTERM, on_term)
    open(os.path.join(args.ready_dir, os.environ["RANK"]), "w").close()
    for _ in range(600):
        time.sleep(0.1)


{"dataloader": dataloader, "env": env, "record": fail_with_record, "sigterm": sigterm}[args.mode]()
