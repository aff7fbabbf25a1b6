package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "github.com/containerd/cgroups/stats/v1"
	v2 "github.com/containerd/cgroups/v2/stats"
	"github.com/containerd/containerd"
	apievents "github.com/containerd/containerd/api/events"
	eventsapi "github.com/containerd/containerd/events"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/runtime/v2/runc/options"
	"github.com/containerd/typeurl"
)

type eventsEnvelope = eventsapi.Envelope

// exitEventFor: env is a /tasks/exit of process id (the container id for init).
func (r *Run) exitEventFor(env *eventsapi.Envelope, id string) bool {
	v, err := typeurl.UnmarshalAny(env.Event)
	e, ok := v.(*apievents.TaskExit)
	return err == nil && ok && e.ID == id
}

// detailsExecID decodes a Pids entry's Info (runc's ProcessDetails).
func (r *Run) detailsExecID(in containerd.ProcessInfo) string {
	v, err := typeurl.UnmarshalAny(in.Info)
	if err != nil {
		return "undecodable"
	}
	if d, ok := v.(*options.ProcessDetails); ok {
		return "exec_id=" + d.ExecID
	}
	return fmt.Sprintf("%T", v)
}

// metrics notes the type URL of a running task's metrics and which cgroup fields are present.
func (r *Run) metrics(key string, c *Ctr) {
	var m interface{}
	var url string
	err := r.call(key, func(ctx context.Context) error {
		mt, err := c.task.Metrics(ctx)
		if err != nil {
			return err
		}
		if mt.Data == nil {
			url = "(no data)"
			return nil
		}
		url = mt.Data.GetTypeUrl()
		m, err = typeurl.UnmarshalAny(mt.Data)
		return err
	})
	if err != nil {
		return
	}
	r.note(key+" type", url)
	var fields []string
	switch s := m.(type) {
	case *v1.Metrics:
		if s.Memory != nil && s.Memory.Usage != nil {
			fields = append(fields, "memory.usage"+positive(s.Memory.Usage.Usage))
		}
		if s.CPU != nil && s.CPU.Usage != nil {
			fields = append(fields, "cpu.usage"+positive(s.CPU.Usage.Total))
		}
		if s.Pids != nil {
			fields = append(fields, "pids.current"+positive(s.Pids.Current))
		}
		if s.Blkio != nil {
			fields = append(fields, "blkio")
		}
		if s.MemoryOomControl != nil {
			fields = append(fields, "memory_oom_control")
		}
		if len(s.Hugetlb) > 0 {
			fields = append(fields, "hugetlb")
		}
	case *v2.Metrics:
		if s.Memory != nil {
			fields = append(fields, "memory.usage"+positive(s.Memory.Usage))
		}
		if s.CPU != nil {
			fields = append(fields, "cpu.usage"+positive(s.CPU.UsageUsec))
		}
		if s.Pids != nil {
			fields = append(fields, "pids.current"+positive(s.Pids.Current))
		}
		if s.Io != nil {
			fields = append(fields, "io")
		}
		if s.MemoryEvents != nil {
			fields = append(fields, "memory_events")
		}
	default:
		fields = append(fields, fmt.Sprintf("unknown type %T", m))
	}
	r.note(key+" fields", strings.Join(fields, " "))
}

func positive(v uint64) string {
	if v > 0 {
		return ">0"
	}
	return "=0"
}

// metricsLimit notes the memory limit the task's metrics report.
func (r *Run) metricsLimit(key string, c *Ctr) {
	var val string
	err := r.do(func(ctx context.Context) error {
		mt, err := c.task.Metrics(ctx)
		if err != nil {
			return err
		}
		m, err := typeurl.UnmarshalAny(mt.Data)
		if err != nil {
			return err
		}
		switch s := m.(type) {
		case *v1.Metrics:
			if s.Memory != nil && s.Memory.Usage != nil {
				val = strconv.FormatUint(s.Memory.Usage.Limit, 10)
			}
		case *v2.Metrics:
			if s.Memory != nil {
				val = strconv.FormatUint(s.Memory.UsageLimit, 10)
			}
		}
		return nil
	})
	if err != nil {
		val = "error " + class(err)
	}
	r.note(key, val)
}

func unified() bool {
	var st syscall.Statfs_t
	return syscall.Statfs("/sys/fs/cgroup", &st) == nil && st.Type == 0x63677270 // CGROUP2_SUPER_MAGIC
}

// cgroupValue reads a container's cgroup file from the host (cgroup path /<ns>/<id>, containerd's default).
func cgroupValue(c *Ctr, controller, v1file, v2file string) string {
	var p string
	if unified() {
		p = filepath.Join("/sys/fs/cgroup", c.ns, c.id, v2file)
	} else {
		p = filepath.Join("/sys/fs/cgroup", controller, c.ns, c.id, v1file)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return "unreadable"
	}
	return strings.TrimSpace(string(data))
}

// runcDelete runs `runc --root <root>/<ns> delete --force <id>` behind the shim's back.
func (r *Run) runcDelete(c *Ctr) string {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Step)
	defer cancel()
	out, err := exec.CommandContext(ctx, r.cfg.Runc, "--root", filepath.Join(r.cfg.RuncRoot, c.ns), "delete", "--force", c.id).CombinedOutput()
	if err != nil {
		r.msgs["runc delete --force"] = strings.TrimSpace(string(out))
		return "failed"
	}
	return "ok"
}

// importImage makes the test image available in namespace ns (from -image-tar, once).
func (r *Run) importImage(ns string) error {
	return r.do(func(ctx context.Context) error {
		ctx = namespaces.WithNamespace(ctx, ns)
		if img, err := r.client.GetImage(ctx, r.cfg.Image); err == nil {
			return img.Unpack(ctx, r.cfg.Snapshotter)
		}
		if r.cfg.ImageTar == "" {
			return fmt.Errorf("no -image-tar to import into namespace %s", ns)
		}
		f, err := os.Open(r.cfg.ImageTar)
		if err != nil {
			return err
		}
		defer f.Close()
		imgs, err := r.client.Import(ctx, f)
		if err != nil {
			return err
		}
		for _, im := range imgs {
			if err := containerd.NewImage(r.client, im).Unpack(ctx, r.cfg.Snapshotter); err != nil {
				return err
			}
		}
		return nil
	})
}

// shimPid finds the shim serving container id: a containerd-shim-* process whose arguments name
// the id (-id ID) and this containerd's socket (-address ADDR). Both shims are started so.
func (r *Run) shimPid(id string) int {
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		data, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(data), "\x00"), "\x00")
		if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
			continue
		}
		hasID, hasAddr := false, false
		for i := 0; i+1 < len(args); i++ {
			switch args[i] {
			case "-id", "--id":
				hasID = hasID || args[i+1] == id
			case "-address", "--address":
				hasAddr = hasAddr || args[i+1] == r.cfg.Address
			}
		}
		if hasID && hasAddr {
			pid, _ := strconv.Atoi(filepath.Base(d))
			return pid
		}
	}
	return 0
}

// procCgroups: /proc/<pid>/cgroup as "controller=path" for the controllers that matter.
func procCgroups(pid int) map[string]string {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	res := map[string]string{}
	if err != nil {
		return res
	}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, ctl := range strings.Split(f[1], ",") {
			if ctl == "" {
				ctl = "unified"
			}
			res[ctl] = f[2]
		}
	}
	return res
}

// makeCgroup creates cgroup path in every hierarchy (cgroup v1: each controller; v2: the one).
func makeCgroup(path string) error {
	if unified() {
		return os.MkdirAll(filepath.Join("/sys/fs/cgroup", path), 0o755)
	}
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*")
	for _, d := range dirs {
		base := filepath.Base(d)
		if base == "unified" {
			continue
		}
		if fi, err := os.Stat(filepath.Join(d, "cgroup.procs")); err != nil || fi.IsDir() {
			continue
		}
		p := d
		for _, part := range strings.Split(strings.Trim(path, "/"), "/") {
			p = filepath.Join(p, part)
			if err := os.Mkdir(p, 0o755); err != nil && !os.IsExist(err) {
				return err
			}
			if strings.Contains(base, "cpuset") { // an empty cpuset takes no process
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if v, err := os.ReadFile(filepath.Join(filepath.Dir(p), f)); err == nil {
						_ = os.WriteFile(filepath.Join(p, f), v, 0o644)
					}
				}
			}
		}
	}
	return nil
}

func scShimCgroup(r *Run) {
	cg := "/" + r.cfg.Namespace + "/shim-" + r.label
	if err := makeCgroup(cg); err != nil {
		r.abort("making cgroup %s: %v", cg, err)
	}
	id := r.id("")
	c := r.containerIn(r.ctx, r.ns, id, runcOptions(options.Options{ShimCgroup: cg}),
		[]string{"sh", "-c", "echo ready; exec sleep 1000"}, nil)
	out := newBuf()
	r.must("create", r.newTask(c, fifoIO(nil, out, out)))
	ch := r.waitCh(c.name, c, c.task)
	r.must("start", r.start(c.name, c, c.task, "init"))
	pid := r.shimPid(id)
	r.note("shim process found", "%v", pid > 0)
	if pid > 0 {
		var in, out []string
		for ctl, p := range procCgroups(pid) {
			// cgroup v1: the controllers; v2: the one hierarchy
			if strings.HasPrefix(ctl, "name=") || ctl == "misc" || ctl == "rdma" || (ctl == "unified") != unified() {
				continue
			}
			if p == cg {
				in = append(in, ctl)
			} else {
				out = append(out, ctl)
			}
		}
		sort.Strings(in)
		sort.Strings(out)
		r.note("shim in ShimCgroup", "in=[%s] not=[%s]", strings.Join(in, ","), strings.Join(out, ","))
	}
	r.stopSleeper(c, ch)
}

// restartContainerd asks run_conformance.sh to restart containerd (SIGUSR1, repeated until the
// restart counter in -restart-file reaches the number asked for) and reconnects.
func (r *Run) restartContainerd() error {
	if r.cfg.RestartPid == 0 || r.cfg.RestartFile == "" {
		return fmt.Errorf("no -restart-pid/-restart-file: started without run_conformance.sh")
	}
	read := func() int {
		data, _ := os.ReadFile(r.cfg.RestartFile)
		n, _ := strconv.Atoi(strings.TrimSpace(string(data)))
		return n
	}
	want := read() + 1
	if err := os.WriteFile(r.cfg.RestartFile+".want", []byte(strconv.Itoa(want)), 0o644); err != nil {
		return err
	}
	deadline := time.Now().Add(60 * time.Second)
	for read() < want {
		if time.Now().After(deadline) {
			return fmt.Errorf("containerd restart %d not done after 60s", want)
		}
		if err := syscall.Kill(r.cfg.RestartPid, syscall.SIGUSR1); err != nil {
			return err
		}
		time.Sleep(100 * time.Millisecond) // the restart itself is the event; its counter file is polled
	}
	client, err := containerd.New(r.cfg.Address, containerd.WithTimeout(10*time.Second))
	if err != nil {
		return err
	}
	r.client.Close()
	r.client = client
	return nil
}

func scDaemonRestart(r *Run) {
	out := newBuf()
	inR, inW := io.Pipe()
	defer inW.Close()
	c := r.container([]string{"sh", "-c", `echo before; read l; echo "after:$l"; exec sleep 1000`}, nil)
	r.must("create", r.newTask(c, fifoIO(inR, out, out)))
	oldCh := r.waitCh(c.name+" pre-restart", c, c.task)
	r.must("start", r.start(c.name, c, c.task, "init"))
	r.note("before", "%v", out.waitFor("before", r.cfg.Step))
	if err := r.restartContainerd(); err != nil {
		r.note("restart", "error: %v", err)
		return
	}
	r.note("restart", "ok")
	r.ev.subscribe(r, r.client, r.ns)
	r.exit("pre-restart wait", oldCh)
	var t containerd.Task
	r.must("reload", r.call("reload", func(ctx context.Context) error {
		cc, err := r.client.LoadContainer(ctx, c.id)
		if err != nil {
			return err
		}
		c.c = cc
		t, err = cc.Task(ctx, nil)
		return err
	}))
	c.task = t
	r.status("status after restart", c, t)
	r.write("stdin after restart", inW, "x\n")
	r.note("stdout after restart", "%v", out.waitFor("after:x", r.cfg.Step))
	eout := newBuf()
	spec := r.execSpec(c, false, "echo", "exec-after-restart")
	var p containerd.Process
	if r.call("exec", func(ctx context.Context) error {
		var err error
		p, err = t.Exec(ctx, "e1", spec, fifoIO(nil, eout, eout))
		return err
	}) == nil {
		ech := r.waitCh("exec", c, p)
		if r.start("exec", c, p, "e1") == nil {
			r.exit("exec exit", ech)
			r.ioWait("exec io", p.IO())
			r.note("exec stdout", "%q", eout.String())
			r.del("exec delete", c, p)
		}
	}
	ch := r.waitCh(c.name, c, t)
	r.call(c.name+" kill", func(ctx context.Context) error { return t.Kill(ctx, syscall.SIGKILL) })
	r.exit(c.name+" exit", ch)
	r.finish(c)
}
