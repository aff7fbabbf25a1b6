# (test/gpu copy: the store port comes from NCCL_TEST_PORT, default 29511, so two such containers can
# share the host network.)
# Two ranks, one per GPU, NCCL communicator alive (like a tensor-parallel server). Each rank writes its
# pid, then every 0.5 s its own checksum; when /tmp/nccl/ar exists it runs one all_reduce and writes the result.
import os, sys, time, torch, torch.distributed as dist, torch.multiprocessing as mp

def rank_main(r, world):
    port = int(os.environ.get('NCCL_TEST_PORT', '29511'))
    os.environ.update(MASTER_ADDR='127.0.0.1', MASTER_PORT=str(port))
    torch.cuda.set_device(r)
    dist.init_process_group('nccl', rank=r, world_size=world)
    x = torch.full((1 << 28,), float(r + 1), device='cuda')           # 1 GiB per rank
    t = torch.ones(4, device='cuda'); dist.all_reduce(t); torch.cuda.synchronize()
    open(f'/tmp/nccl/rank{r}.pid', 'w').write(str(os.getpid()))
    if os.environ.get('DESTROY_PG'):
        dist.destroy_process_group(); torch.cuda.synchronize()
    s0 = float(x.sum()); done = False; i = 0
    while True:
        i += 1
        open(f'/tmp/nccl/rank{r}.txt', 'w').write(f'{i} {float(x.sum()) == s0}\n')
        if os.path.exists('/tmp/nccl/ar') and not done:
            if os.environ.get('DESTROY_PG'):
                os.environ['MASTER_PORT'] = str(port + 1); dist.init_process_group('nccl', rank=r, world_size=world)
            t = torch.full((4,), float(r + 1), device='cuda'); dist.all_reduce(t); torch.cuda.synchronize()
            open(f'/tmp/nccl/ar{r}.txt', 'w').write(f'{t.tolist()}\n'); done = True
        time.sleep(0.5)

if __name__ == '__main__':
    mp.spawn(rank_main, args=(2,), nprocs=2)
