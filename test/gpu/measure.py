# Host side, read-only: what distinguishes NCCL ranks from independent CUDA processes.
# Usage: measure.py NAME=PID,PID,... [NAME=...]   Prints one block per container and process:
# fds by kind (per /dev/nvidia* node), maps of device nodes and /dev/shm, libnccl mapped, threads,
# established TCP connections and which given pid holds the other end, unix sockets with their
# names, and NVML's compute processes (nvidia-smi) per GPU.
import collections, os, subprocess, sys

groups = {}
for a in sys.argv[1:]:
    name, pids = a.split('=', 1)
    groups[name] = [int(p) for p in pids.split(',') if p]

def rl(p):
    try:
        return os.readlink(p)
    except OSError:
        return None

def read(p):
    try:
        return open(p).read()
    except OSError:
        return ''

def tcp_table(pid):
    out = {}
    for t in ('tcp', 'tcp6'):
        for line in read(f'/proc/{pid}/net/{t}').splitlines()[1:]:
            f = line.split()
            if len(f) > 9:
                out[int(f[9])] = (f[1], f[2], f[3])
    return out

def unix_table(pid):
    out = {}
    for line in read(f'/proc/{pid}/net/unix').splitlines()[1:]:
        f = line.split()
        if len(f) >= 7:
            out[int(f[6])] = f[7] if len(f) > 7 else ''
    return out

def ep(h):
    a, p = h.split(':')
    if len(a) == 8:
        a = '.'.join(str(int(a[i:i + 2], 16)) for i in (6, 4, 2, 0))
    return f'{a}:{int(p, 16)}'

nvml = collections.defaultdict(list)
try:
    q = subprocess.run(['nvidia-smi', '--query-compute-apps=pid,gpu_uuid,used_memory', '--format=csv,noheader'],
                       capture_output=True, text=True, timeout=30).stdout
    for line in q.splitlines():
        f = [x.strip() for x in line.split(',')]
        nvml[int(f[0])].append(f'{f[1][:12]}..({f[2]})')
except Exception as e:
    print('nvidia-smi failed:', e)

allp = [p for ps in groups.values() for p in ps]
socks = {}   # pid -> set(inode)
tcp = {}
unix = {}
for p in allp:
    socks[p] = set()
    for fd in os.listdir(f'/proc/{p}/fd') if os.path.isdir(f'/proc/{p}/fd') else []:
        t = rl(f'/proc/{p}/fd/{fd}') or ''
        if t.startswith('socket:['):
            socks[p].add(int(t[8:-1]))
    tcp.update(tcp_table(p))
    unix.update(unix_table(p))
owner = {}
for p in allp:
    for ino in socks[p]:
        if ino in tcp and tcp[ino][2] == '01':
            owner[(tcp[ino][0], tcp[ino][1])] = p

for name, pids in groups.items():
    print(f'=== {name}')
    for p in pids:
        comm = read(f'/proc/{p}/comm').strip()
        kinds = collections.Counter()
        shm_fds = set()
        for fd in os.listdir(f'/proc/{p}/fd') if os.path.isdir(f'/proc/{p}/fd') else []:
            t = rl(f'/proc/{p}/fd/{fd}') or '?'
            if t.startswith('/dev/nvidia'):
                kinds[t] += 1
            elif t.startswith('/dev/shm/'):
                kinds['shm'] += 1; shm_fds.add(t)
            elif ':' in t and not t.startswith('/'):
                kinds[t.split(':')[0]] += 1
            else:
                kinds['file'] += 1
        maps = collections.Counter(); shm_maps = set(); nccl_lib = False
        sizes = collections.defaultdict(list)  # (device, perms) -> mapping sizes in KiB
        for line in read(f'/proc/{p}/maps').splitlines():
            f = line.split(None, 5)
            path = f[5] if len(f) > 5 else ''
            if path.startswith('/dev/nvidia'):
                maps[path] += 1
                lo, hi = (int(v, 16) for v in f[0].split('-'))
                sizes[(path, f[1])].append((hi - lo) >> 10)
            elif path.startswith('/dev/shm/'):
                shm_maps.add(path)
            if 'libnccl' in path:
                nccl_lib = True
        thr = len(os.listdir(f'/proc/{p}/task')) if os.path.isdir(f'/proc/{p}/task') else 0
        print(f'pid {p} {comm} threads={thr} libnccl_mapped={nccl_lib} nvml={nvml.get(p, [])}')
        print(f'  fds: {dict(sorted(kinds.items()))}')
        print(f'  device maps: {dict(sorted(maps.items()))}')
        # Issue 16: what tells CUDA IPC importers/exporters and managed memory apart on the host.
        for (path, perms), ks in sorted(sizes.items()):
            big = sorted(ks, reverse=True)[:4]
            print(f'    {path} {perms}: {len(ks)} maps, {sum(ks) >> 10} MiB, largest KiB {big}')
        fdflags = collections.Counter()
        for fd in os.listdir(f'/proc/{p}/fd') if os.path.isdir(f'/proc/{p}/fd') else []:
            t = rl(f'/proc/{p}/fd/{fd}') or ''
            if t.startswith('/dev/nvidia'):
                info = dict(l.split(':', 1) for l in read(f'/proc/{p}/fdinfo/{fd}').splitlines() if ':' in l)
                fdflags[(t, info.get('flags', '?').strip())] += 1
        if fdflags:
            print('  device fd flags: ' + '; '.join(f'{t} {fl} x{n}' for (t, fl), n in sorted(fdflags.items())))
        st = {k: v.strip() for k, v in (l.split(':', 1) for l in read(f'/proc/{p}/status').splitlines() if ':' in l)}
        print(f"  memory: VmRSS {st.get('VmRSS')} RssAnon {st.get('RssAnon')} RssShmem {st.get('RssShmem')} VmSize {st.get('VmSize')}")
        if shm_fds or shm_maps:
            print(f'  /dev/shm fds: {sorted(shm_fds)[:6]}  maps: {sorted(shm_maps)[:6]} ({len(shm_maps)} distinct)')
        conns = []
        for ino in sorted(socks[p]):
            if ino in tcp:
                l, r, st = tcp[ino]
                peer = owner.get((r, l))
                conns.append(f'tcp {ep(l)}->{ep(r)} st={st}' + (f' peer=pid {peer}' if peer else ''))
            elif ino in unix:
                conns.append(f'unix {unix[ino] or "(unnamed)"}')
        if conns:
            c = collections.Counter(conns)
            print('  sockets: ' + '; '.join(f'{k} x{v}' if v > 1 else k for k, v in sorted(c.items())))
