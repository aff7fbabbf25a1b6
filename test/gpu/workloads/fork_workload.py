"""Issue 25's shapes: a CUDA parent whose children were forked after it initialised CUDA.

  fork_workload.py dataloader   training loop fed by DataLoader(num_workers=2, pin_memory=True,
                                persistent_workers=True), the default start method (fork)
  fork_workload.py compile      a torch.compile'd function (inductor's default compile workers)
  fork_workload.py pool         a multiprocessing.Pool(4) (fork) of CPU workers in a CUDA parent

Every second the parent writes /out/parent.txt: "ITER CHECKSUM_OK" (a device tensor's checksum
compared with the one taken at start), and each worker its own progress to /out/worker-PID.txt,
so that the test sees the workers producing after a restore. Runs until killed.
"""
import os
import sys
import time

import torch
import torch.multiprocessing as mp

OUT = "/out"


def write(name, text):
    tmp = os.path.join(OUT, name + ".tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(OUT, name))


class Numbers(torch.utils.data.Dataset):
    def __len__(self):
        return 1 << 30

    def __getitem__(self, i):
        # The worker's own progress: how many items it produced.
        Numbers.made = getattr(Numbers, "made", 0) + 1
        if Numbers.made % 64 == 0:
            write("worker-%d.txt" % os.getpid(), "%d\n" % Numbers.made)
        return torch.full((256,), float(i % 97))


def cpu_work(x):
    s = sum(i * i for i in range(20000 + x % 7))
    write("worker-%d.txt" % os.getpid(), "%d\n" % (int(time.time() * 10) % 100000000))
    return s


def main(shape):
    dev = torch.device("cuda")
    keep = torch.arange(1 << 22, device=dev, dtype=torch.float64)
    want = float(keep.sum())
    w = torch.randn(256, 256, device=dev)
    it = 0
    if shape == "dataloader":
        loader = torch.utils.data.DataLoader(Numbers(), batch_size=64, num_workers=2, pin_memory=True,
                                             persistent_workers=True)
        batches = iter(loader)
        step = lambda: (next(batches).to(dev, non_blocking=True) @ w).sum().item()
    elif shape == "compile":
        f = torch.compile(lambda x: torch.relu(x @ w) * 2 + 1)
        step = lambda: f(torch.randn(64, 256, device=dev)).sum().item()
    elif shape == "pool":
        pool = mp.get_context("fork").Pool(4)
        step = lambda: sum(pool.map(cpu_work, range(8)))
    else:
        sys.exit("unknown shape " + shape)
    last = 0.0
    while True:
        step()
        it += 1
        now = time.time()
        if now - last >= 1.0:
            last = now
            write("parent.txt", "%d %s\n" % (it, float(keep.sum()) == want))
        time.sleep(0.01)


if __name__ == "__main__":
    main(sys.argv[1])
