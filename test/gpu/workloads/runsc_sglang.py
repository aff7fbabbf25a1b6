# Container workload of issue 17 (runsc): shaped like an sglang server. A CUDA parent (1 GiB) and two
# CUDA workers started with spawn (512 MiB each, busy matmuls), and with "with-nvml" an NVML-only
# process (nvmlInit, then nvmlDeviceGetCount every second: GPU device files without CUDA). Every CUDA
# process writes "ITER S0 S OK" to /out/ROLE.txt every ~0.5 s (S0: its tensor's checksum at start,
# S: now, OK: S == S0, so device data that did not survive a checkpoint shows as False). With
# "with-holder" the extra process holds /dev/nvidiactl without CUDA or NVML instead.
# Usage: runsc_sglang.py [with-nvml|with-holder]
import ctypes
import os
import sys
import time

import multiprocessing as mp


def progress(role, i, s0, s):
    tmp = f'/out/{role}.txt.tmp'
    with open(tmp, 'w') as f:
        f.write(f'{i} {s0} {s} {s == s0}\n')
    os.replace(tmp, f'/out/{role}.txt')


def cuda_proc(role, mib, seed, busy):
    import torch
    g = torch.Generator(device='cuda').manual_seed(seed)
    x = torch.randint(0, 7, ((mib << 20) // 4,), device='cuda', dtype=torch.int32, generator=g)
    s0 = int(x.sum())
    a = torch.randn(1024, 1024, device='cuda')
    i = 0
    while True:
        if busy:
            for _ in range(10):
                a = torch.tanh(a @ a)
        i += 1
        progress(role, i, s0, int(x.sum()))
        time.sleep(0.5)


def nvml_only():
    # "ITER PID RC": RC of the last nvmlDeviceGetCount_v2 (0: NVML still answers).
    nvml = ctypes.CDLL('libnvidia-ml.so.1')
    rc = nvml.nvmlInit_v2()
    i = 0
    while True:
        i += 1
        n = ctypes.c_uint()
        rc = rc or nvml.nvmlDeviceGetCount_v2(ctypes.byref(n))
        tmp = '/out/nvml.txt.tmp'
        with open(tmp, 'w') as f:
            f.write(f'{i} {os.getpid()} {rc}\n')
        os.replace(tmp, '/out/nvml.txt')
        time.sleep(1)


def device_holder():
    # Holds the control device without CUDA or NVML: what the driver cannot checkpoint.
    fd = os.open('/dev/nvidiactl', os.O_RDWR)
    with open('/out/holder.txt', 'w') as f:
        f.write(f'{os.getpid()} fd={fd}\n')
    while True:
        time.sleep(1)


if __name__ == '__main__':
    mp.set_start_method('spawn')
    procs = [mp.Process(target=cuda_proc, args=(f'worker{k}', 512, 10 + k, True)) for k in range(2)]
    if len(sys.argv) > 1 and sys.argv[1] == 'with-nvml':
        procs.append(mp.Process(target=nvml_only))
    if len(sys.argv) > 1 and sys.argv[1] == 'with-holder':
        procs.append(mp.Process(target=device_holder))
    for p in procs:
        p.start()
    cuda_proc('parent', 1024, 1, False)
