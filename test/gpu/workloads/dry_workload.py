# Stand-in for the CUDA workloads in run-all.sh's dry run (DRY=1, no GPU): the same processes and the
# same progress files, no CUDA. Usage: dry_workload.py plain|with-holder|indep2|p2p1|nccl
import os, sys, time, multiprocessing as mp

def loop(path):
    i = 0
    while True:
        i += 1
        with open(path, 'w') as f:
            f.write(f'{i} 1.0 1.0 True\n')
        time.sleep(0.5)

if __name__ == '__main__':
    mp.set_start_method('spawn')
    k = sys.argv[1]
    if k in ('plain', 'with-holder'):
        mp.Process(target=loop, args=('/out/child.txt',)).start()
        loop('/out/parent.txt')
    elif k in ('indep2', 'nccl'):
        d = '/tmp/mg' if k == 'indep2' else '/tmp/nccl'
        ps = [mp.Process(target=loop, args=(f'{d}/rank{r}.txt',)) for r in (0, 1)]
        [p.start() for p in ps]; [p.join() for p in ps]
    else:
        loop('/tmp/mg/p2p.txt')
