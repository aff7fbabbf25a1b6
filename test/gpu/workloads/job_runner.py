"""A job runner: a CUDA parent (PyTorch) that starts a short-lived CUDA child every 0.7 s with the
spawn start method; each child works ~1.5 s on the GPU and ends. Writes "STARTED DONE INTACT" to
/out/jobs.txt: INTACT says the parent's device tensor still holds what was written."""
import multiprocessing as mp
import os
import time

import torch


def job(n):
    a = torch.full((2048, 2048), float(n), device="cuda")
    end = time.time() + 1.5
    while time.time() < end:
        a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()
    return n


if __name__ == "__main__":
    ctx = mp.get_context("spawn")
    keep = torch.arange(1 << 22, device="cuda", dtype=torch.float32)
    want = float(keep.sum())
    started = done = 0
    live = []
    while True:
        live = [p for p in live if p.is_alive() or (p.join() or False)]
        done = started - len(live)
        p = ctx.Process(target=job, args=(started,))
        p.start()
        live.append(p)
        started += 1
        intact = float(keep.sum()) == want
        with open("/out/jobs.txt.tmp", "w") as f:
            f.write(f"{started} {done} {intact}\n")
        os.replace("/out/jobs.txt.tmp", "/out/jobs.txt")
        time.sleep(0.7)
