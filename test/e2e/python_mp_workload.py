"""The Python multiprocessing shape of issue 16, without a GPU: a parent that starts one worker with
the 'spawn' start method and feeds it through an mp.Queue (a pipe plus POSIX named semaphores under
/dev/shm, which glibc creates under a temporary name, maps, then links to their real name).

The worker writes "<last item> <items seen> <pid> <their sum>" to OUT/progress; the parent writes
its own pid and the worker's to OUT/parent before the first item. Both go on until killed, so a
restored container continues the count.

Why the files are written as they are: a leave-running checkpoint may freeze the worker at any
instruction, and its restore needs every file the worker held open to be there again, after the
original went on and was killed. A temporary file renamed over its target is gone by then (the
restore fails on it). So the worker opens OUT/progress once, for its life, and overwrites it in
place at a fixed width (one pwrite): the file it holds always exists, at the same size. A reader
can still meet a record half overwritten: the sum tells it to read again.
Usage: python3 python_mp_workload.py OUT
"""
import multiprocessing as mp
import os
import sys
import time


def record(item, seen, pid):
    return ("%12d %12d %12d %14d\n" % (item, seen, pid, item + seen + pid)).encode()


def worker(q, out):
    fd = os.open(os.path.join(out, "progress"), os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
    seen = 0
    while True:
        item = q.get()
        seen += 1
        os.pwrite(fd, record(item, seen, os.getpid()), 0)


def main():
    out = sys.argv[1]
    mp.set_start_method("spawn")
    q = mp.Queue()
    p = mp.Process(target=worker, args=(q, out))
    p.start()
    # Written and closed before the first item: no checkpoint the test takes can find it open.
    with open(os.path.join(out, "parent"), "w") as f:
        f.write("%d %d\n" % (os.getpid(), p.pid))
    item = 0
    while True:
        item += 1
        q.put(item)
        time.sleep(0.05)


if __name__ == "__main__":
    main()
