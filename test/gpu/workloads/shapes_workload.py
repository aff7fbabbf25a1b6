# Container workloads of issue 16, shaped like what people run. Every CUDA process writes
# "ITER S0 S OK" to /out/ROLE.txt every ~0.5 s (S0: its tensor's checksum at start, S: now, OK: S == S0).
#   sglang   CUDA parent + 2 CUDA workers (spawn, busy matmuls) + a CPU tokenizer, fed through mp.Queue;
#            with HTTP_PORT set, the parent also serves GET / (its iteration and checksum) on that TCP
#            port, as an inference server's HTTP front end does
#   ipc      a CUDA tensor shared parent -> child through torch.multiprocessing (CUDA IPC)
#   managed  cudaMallocManaged-style memory (cuMemAllocManaged, 1 GiB) beside an ordinary tensor
#   single   one CUDA process (ROLE, MiB): the init of the exec case, or the exec'd one
#   big      one process holding GiB of device memory (default 20)
# Usage: shapes_workload.py MODE [ARGS]
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


def tensor(mib, seed):
    import torch
    g = torch.Generator(device='cuda').manual_seed(seed)
    x = torch.randint(0, 7, ((mib << 20) // 4,), device='cuda', dtype=torch.int32, generator=g)
    return x, int(x.sum())


def cuda_worker(role, mib, q, busy):
    import torch
    x, s0 = tensor(mib, hash(role) & 0xffff)
    a = torch.randn(2048, 2048, device='cuda')
    i = 0
    while True:
        if q is not None:
            try:
                q.get(timeout=1)
            except Exception:
                pass
        if busy:
            for _ in range(20):
                a = torch.tanh(a @ a)
        i += 1
        progress(role, i, s0, int(x.sum()))
        if q is None:
            time.sleep(0.5)


def tokenizer(inq, outqs):
    n = 0
    while True:
        text = inq.get()
        toks = [ord(c) for c in text]
        outqs[n % len(outqs)].put(toks)
        n += 1
        with open('/out/tokenizer.txt', 'w') as f:
            f.write(f'{n} 0 0 True\n')


def http_front_end(port, state):
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = f'{state["i"]} {state["s0"]} {state["s"]}\n'.encode()
            self.send_response(200)
            self.send_header('Content-Length', str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    srv = http.server.ThreadingHTTPServer(('127.0.0.1', port), Handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()


def sglang():
    mp.set_start_method('spawn')
    inq = mp.Queue()
    wq = [mp.Queue(), mp.Queue()]
    procs = [mp.Process(target=cuda_worker, args=(f'worker{k}', 1024, wq[k], True)) for k in range(2)]
    procs.append(mp.Process(target=tokenizer, args=(inq, wq)))
    for p in procs:
        p.start()
    import torch
    x, s0 = tensor(2048, 1)
    state = {'i': 0, 's0': s0, 's': s0}
    if os.environ.get('HTTP_PORT'):
        http_front_end(int(os.environ['HTTP_PORT']), state)
    i = 0
    while True:
        i += 1
        state['i'], state['s'] = i, int(x.sum())
        inq.put(f'request {i}')
        inq.put(f'request {i}b')
        progress('parent', i, s0, int(x.sum()))
        time.sleep(0.25)


def ipc_child(q):
    t = q.get()  # a CUDA tensor of the parent's, opened through CUDA IPC
    s0 = int(t.sum())
    i = 0
    while True:
        i += 1
        progress('child', i, s0, int(t.sum()))
        time.sleep(0.5)


def ipc():
    import torch.multiprocessing as tmp
    tmp.set_start_method('spawn')
    x, s0 = tensor(1024, 2)
    q = tmp.Queue()
    p = tmp.Process(target=ipc_child, args=(q,))
    p.start()
    q.put(x)
    i = 0
    while True:
        i += 1
        progress('parent', i, s0, int(x.sum()))
        time.sleep(0.5)


def managed():
    import torch
    x, s0 = tensor(512, 3)  # makes the primary context current in this thread
    cu = ctypes.CDLL('libcuda.so.1')
    ptr = ctypes.c_uint64()
    size = 1 << 30
    rc = cu.cuMemAllocManaged(ctypes.byref(ptr), ctypes.c_size_t(size), 1)  # CU_MEM_ATTACH_GLOBAL
    if rc != 0:
        raise SystemExit(f'cuMemAllocManaged: {rc}')
    i = 0
    while True:
        i += 1
        rc = cu.cuMemsetD8_v2(ptr, ctypes.c_ubyte(i & 0xff), ctypes.c_size_t(size))
        cu.cuCtxSynchronize()
        progress('managed', i, s0, int(x.sum()) if rc == 0 else -rc)
        time.sleep(0.5)


def big(gib):
    import torch
    x = torch.full((gib << 30,), 7, dtype=torch.uint8, device='cuda')
    s0 = int(x[:: 1 << 20].sum())
    i = 0
    while True:
        i += 1
        progress('big', i, s0, int(x[:: 1 << 20].sum()))
        time.sleep(0.5)


if __name__ == '__main__':
    mode = sys.argv[1]
    if mode == 'sglang':
        sglang()
    elif mode == 'ipc':
        ipc()
    elif mode == 'managed':
        managed()
    elif mode == 'single':
        cuda_worker(sys.argv[2], int(sys.argv[3]), None, False)
    elif mode == 'big':
        big(int(sys.argv[2]) if len(sys.argv) > 2 else 20)
    else:
        raise SystemExit(f'unknown mode {mode}')
