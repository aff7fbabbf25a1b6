"""A single-GPU torch.distributed job (what torchrun with one process runs): NCCL as a group of one,
an all_reduce in a loop. Writes "ITER INTACT" to /out/nccl1.txt: with one rank the all_reduce keeps
the tensor as it was, so INTACT says the device data and the communicator survived."""
import os
import time

import torch
import torch.distributed as dist

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", os.environ.get("NCCL1_PORT", "29533"))
dist.init_process_group("nccl", rank=0, world_size=1)
x = torch.ones(1 << 20, device="cuda")
it = 0
while True:
    dist.all_reduce(x)
    torch.cuda.synchronize()
    it += 1
    if it % 20 == 0:
        intact = bool((x == 1.0).all().item())
        with open("/out/nccl1.txt.tmp", "w") as f:
            f.write(f"{it} {intact}\n")
        os.replace("/out/nccl1.txt.tmp", "/out/nccl1.txt")
    time.sleep(0.01)
