"""The Python multiprocessing shape of issue 16, without a GPU: a parent that starts one worker with
the 'spawn' start method and feeds it through an mp.Queue (a pipe plus POSIX named semaphores under
/dev/shm, which glibc creates under a temporary name, maps, then links to their real name).

The worker writes "<last item> <items seen> <pid>" to OUT/progress (atomically); the parent writes
its own pid to OUT/parent. Both go on until killed, so a restored container continues the count.
Usage: python3 python_mp_workload.py OUT
"""
import multiprocessing as mp
import os
import sys
import time


def write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def worker(q, out):
    seen = 0
    while True:
        item = q.get()
        seen += 1
        write(os.path.join(out, "progress"), "%d %d %d\n" % (item, seen, os.getpid()))


def main():
    out = sys.argv[1]
    mp.set_start_method("spawn")
    q = mp.Queue()
    p = mp.Process(target=worker, args=(q, out))
    p.start()
    write(os.path.join(out, "parent"), "%d %d\n" % (os.getpid(), p.pid))
    item = 0
    while True:
        item += 1
        q.put(item)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
