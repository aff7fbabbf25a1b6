package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/errdefs"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/containerd/runtime/v2/runc/options"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

type observation struct{ key, val string }

// Run is one scenario against one runtime.
type Run struct {
	cfg      *Config
	scenario string
	label    string // runc | ours
	runtime  string
	client   *containerd.Client
	ns       string
	ctx      context.Context // namespaced, lives as long as the run (waits, IO)
	cancel   context.CancelFunc
	obs      []observation
	msgs     map[string]string // error messages by key (not compared)
	roles    map[uint32]string // pid -> "init:<ctr>" / "<exec id>"
	ctrs     []*Ctr
	ev       *collector
	seq      int
}

// Ctr is a container made by the scenario, with what cleanup needs.
type Ctr struct {
	name    string // c0, c1, ... (the id differs between runtimes; this does not)
	id, ns  string
	c       containerd.Container
	task    containerd.Task
	created bool // task create returned OK: a /tasks/delete is due at the end
	oom     bool // a /tasks/oom is due too (waited for at the end, like /tasks/delete)
	ctx     context.Context
}

type abortRun struct{ why string }

// abort ends the scenario run (cleanup still runs): a step that the rest depends on failed.
func (r *Run) abort(format string, args ...interface{}) {
	panic(abortRun{fmt.Sprintf(format, args...)})
}

func runScenario(cfg *Config, s scenario, label, runtime string) (r *Run) {
	r = &Run{cfg: cfg, scenario: s.name, label: label, runtime: runtime, ns: cfg.Namespace,
		msgs: map[string]string{}, roles: map[uint32]string{}}
	client, err := containerd.New(cfg.Address, containerd.WithTimeout(10*time.Second))
	if err != nil {
		r.note("connect", "error: "+err.Error())
		return r
	}
	r.client = client
	r.ctx, r.cancel = context.WithCancel(namespaces.WithNamespace(context.Background(), r.ns))
	r.ev = newCollector()
	r.ev.subscribe(r, r.client, r.ns)
	func() {
		defer func() {
			if p := recover(); p != nil {
				a, ok := p.(abortRun)
				if !ok {
					panic(p)
				}
				r.note("aborted", a.why)
			}
		}()
		s.fn(r)
	}()
	r.cleanup()
	r.noteEvents()
	r.ev.stop()
	r.cancel()
	r.client.Close()
	return r
}

func (r *Run) note(key, format string, args ...interface{}) {
	val := format
	if len(args) > 0 {
		val = fmt.Sprintf(format, args...)
	}
	for _, o := range r.obs {
		if o.key == key {
			panic("duplicate observation key " + key + " in " + r.scenario)
		}
	}
	r.obs = append(r.obs, observation{key, val})
}

func (r *Run) value(key string) string {
	for _, o := range r.obs {
		if o.key == key {
			return o.val
		}
	}
	return missing
}

// class is the errdefs class a client sees, never the message.
func class(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, errTimeout):
		return "TIMEOUT"
	case errors.Is(err, context.DeadlineExceeded) || errdefs.IsDeadlineExceeded(err):
		return "TIMEOUT"
	case errdefs.IsNotFound(err):
		return "NotFound"
	case errdefs.IsAlreadyExists(err):
		return "AlreadyExists"
	case errdefs.IsFailedPrecondition(err):
		return "FailedPrecondition"
	case errdefs.IsInvalidArgument(err):
		return "InvalidArgument"
	case errdefs.IsUnavailable(err):
		return "Unavailable"
	case errdefs.IsNotImplemented(err):
		return "NotImplemented"
	case errdefs.IsCanceled(err):
		return "Canceled"
	}
	return "Unknown"
}

var errTimeout = errors.New("no answer before the step's deadline")

// call runs fn with the step deadline, notes its error class under key and returns the error. A
// call that ignores its context is abandoned 5 s after the deadline (noted TIMEOUT, never hangs).
func (r *Run) call(key string, fn func(ctx context.Context) error) error {
	err := r.do(fn)
	r.note(key, class(err))
	if err != nil {
		r.msgs[key] = err.Error()
	}
	return err
}

// do is call without a note.
func (r *Run) do(fn func(ctx context.Context) error) error { return r.doWithin(r.cfg.Step, fn) }

// doWithin is do with deadline d instead of the step's.
func (r *Run) doWithin(d time.Duration, fn func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(r.ctx, d)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	select {
	case err := <-done:
		return err
	case <-time.After(d + 5*time.Second):
		return errTimeout
	}
}

// must aborts the run when err is set.
func (r *Run) must(key string, err error) {
	if err != nil {
		r.abort("%s failed: %s", key, class(err))
	}
}

// ---------- containers and tasks ----------

func (r *Run) id(suffix string) string {
	r.seq++
	return fmt.Sprintf("%s-%s-%d%s", strings.ReplaceAll(r.scenario, "_", "-"), r.label, r.seq, suffix)
}

// container makes a container of the test image whose process runs args.
func (r *Run) container(args []string, specOpts []oci.SpecOpts, ctrOpts ...containerd.NewContainerOpts) *Ctr {
	return r.containerIn(r.ctx, r.ns, r.id(""), nil, args, specOpts, ctrOpts...)
}

func (r *Run) containerIn(ctx context.Context, ns, id string, runtimeOpts interface{}, args []string,
	specOpts []oci.SpecOpts, ctrOpts ...containerd.NewContainerOpts) *Ctr {
	c := &Ctr{name: fmt.Sprintf("c%d", len(r.ctrs)), id: id, ns: ns, ctx: ctx}
	err := r.do(func(sctx context.Context) error {
		sctx = namespaces.WithNamespace(sctx, ns)
		img, err := r.client.GetImage(sctx, r.cfg.Image)
		if err != nil {
			return err
		}
		opts := []containerd.NewContainerOpts{
			containerd.WithImage(img),
			containerd.WithSnapshotter(r.cfg.Snapshotter),
			containerd.WithNewSnapshot(id+"-snap", img),
			containerd.WithRuntime(r.runtime, runtimeOpts),
			containerd.WithNewSpec(append([]oci.SpecOpts{oci.WithImageConfig(img), oci.WithProcessArgs(args...)}, specOpts...)...),
		}
		c.c, err = r.client.NewContainer(sctx, id, append(opts, ctrOpts...)...)
		return err
	})
	if err != nil {
		r.abort("creating container %s: %v", c.name, err)
	}
	r.ctrs = append(r.ctrs, c)
	return c
}

// newTask creates c's task (notes "<c> create" and, on success, the pid's presence).
func (r *Run) newTask(c *Ctr, creator cio.Creator, opts ...containerd.NewTaskOpts) error {
	key := c.name + " create"
	err := r.call(key, func(ctx context.Context) error {
		t, err := c.c.NewTask(namespaces.WithNamespace(ctx, c.ns), creator, opts...)
		if err == nil {
			c.task = t
		}
		return err
	})
	if err == nil {
		c.created = true
		r.roles[c.task.Pid()] = "init"
		r.note(c.name+" create pid", pidState(c.task.Pid()))
	}
	return err
}

func pidState(pid uint32) string {
	if pid > 0 {
		return ">0"
	}
	return "0"
}

// start starts p (notes "<key> start", the pid and whether it equals the create pid for init).
func (r *Run) start(key string, c *Ctr, p containerd.Process, role string) error {
	var pid uint32
	err := r.call(key+" start", func(ctx context.Context) error {
		return p.Start(namespaces.WithNamespace(ctx, c.ns))
	})
	if err == nil {
		pid = p.Pid()
		if prev, ok := r.roles[pid]; ok && prev != role {
			role = prev // init keeps the pid Create returned
		}
		r.roles[pid] = role
		r.note(key+" start pid", "%s (%s)", pidState(pid), role)
	}
	return err
}

// waitCh registers a Wait (before Start, as clients do); the channel outlives the step.
func (r *Run) waitCh(key string, c *Ctr, p containerd.Process) <-chan containerd.ExitStatus {
	var ch <-chan containerd.ExitStatus
	err := r.call(key+" wait", func(context.Context) error {
		var err error
		ch, err = p.Wait(c.ctx)
		return err
	})
	if err != nil {
		return nil
	}
	return ch
}

// exit receives from a wait channel within the step deadline and notes code, exited_at, error.
func (r *Run) exit(key string, ch <-chan containerd.ExitStatus) {
	if ch == nil {
		r.note(key, "no wait channel")
		return
	}
	select {
	case st := <-ch:
		code, at, err := st.Result()
		r.note(key, "code=%d exited_at=%s err=%s", code, zeroness(at), class(err))
		if err != nil {
			r.msgs[key] = err.Error()
		}
	case <-time.After(r.cfg.Step):
		r.note(key, "TIMEOUT (no exit within %s)", r.cfg.Step)
	}
}

func zeroness(t time.Time) string {
	if t.IsZero() {
		return "zero"
	}
	return "set"
}

// status notes a process's status as the client sees it.
func (r *Run) status(key string, c *Ctr, p containerd.Process) {
	var st containerd.Status
	err := r.do(func(ctx context.Context) error {
		var err error
		st, err = p.Status(namespaces.WithNamespace(ctx, c.ns))
		return err
	})
	if err != nil {
		r.note(key, "error %s", class(err))
		r.msgs[key] = err.Error()
		return
	}
	if st.Status == containerd.Stopped {
		r.note(key, "%s code=%d exited_at=%s", st.Status, st.ExitStatus, zeroness(st.ExitTime))
	} else {
		r.note(key, "%s", st.Status)
	}
}

// del deletes a process and notes the returned exit status.
func (r *Run) del(key string, c *Ctr, p containerd.Process, opts ...containerd.ProcessDeleteOpts) {
	var st *containerd.ExitStatus
	err := r.do(func(ctx context.Context) error {
		var err error
		st, err = p.Delete(namespaces.WithNamespace(ctx, c.ns), opts...)
		return err
	})
	if err != nil {
		r.note(key, "error %s", class(err))
		r.msgs[key] = err.Error()
		return
	}
	r.note(key, "code=%d exited_at=%s", st.ExitCode(), zeroness(st.ExitTime()))
	if p == containerd.Process(c.task) {
		c.task = nil
	}
}

// ioWait waits for the client side of a process's IO to drain (the shim closed its ends).
func (r *Run) ioWait(key string, io cio.IO) {
	if io == nil {
		r.note(key, "no io")
		return
	}
	done := make(chan struct{})
	go func() { io.Wait(); close(done) }()
	select {
	case <-done:
		r.note(key, "drained")
	case <-time.After(r.cfg.Step):
		r.note(key, "TIMEOUT (stdout/stderr not closed by the shim)")
		io.Cancel()
	}
}

// execSpec is the container's process with other args (and terminal setting).
func (r *Run) execSpec(c *Ctr, terminal bool, args ...string) *specs.Process {
	var spec *oci.Spec
	err := r.do(func(ctx context.Context) error {
		var err error
		spec, err = c.c.Spec(namespaces.WithNamespace(ctx, c.ns))
		return err
	})
	if err != nil {
		r.abort("spec of %s: %v", c.name, err)
	}
	p := *spec.Process
	p.Args = args
	p.Terminal = terminal
	return &p
}

// cleanup removes whatever the scenario left: kill+delete tasks, delete containers.
func (r *Run) cleanup() {
	var problems []string
	for _, c := range r.ctrs {
		err := r.do(func(ctx context.Context) error {
			ctx = namespaces.WithNamespace(ctx, c.ns)
			t, err := c.c.Task(ctx, nil)
			if errdefs.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return err
			}
			_, err = t.Delete(ctx, containerd.WithProcessKill)
			if errdefs.IsNotFound(err) {
				return nil
			}
			return err
		})
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s task delete: %s", c.name, class(err)))
			r.msgs["cleanup"] += err.Error() + "; "
		}
		err = r.do(func(ctx context.Context) error {
			return c.c.Delete(namespaces.WithNamespace(ctx, c.ns), containerd.WithSnapshotCleanup)
		})
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s container delete: %s", c.name, class(err)))
			r.msgs["cleanup"] += err.Error() + "; "
		}
	}
	if len(problems) == 0 {
		r.note("cleanup", "ok")
	} else {
		r.note("cleanup", strings.Join(problems, "; "))
	}
}

// ---------- output capture ----------

// sbuf is a goroutine-safe buffer that wakes waiters on every write.
type sbuf struct {
	mu   sync.Mutex
	b    bytes.Buffer
	wake chan struct{}
}

func newBuf() *sbuf { return &sbuf{wake: make(chan struct{})} }

func (s *sbuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.b.Write(p)
	close(s.wake)
	s.wake = make(chan struct{})
	return len(p), nil
}

func (s *sbuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until the buffer contains sub, at most d.
func (s *sbuf) waitFor(sub string, d time.Duration) bool {
	deadline := time.After(d)
	for {
		s.mu.Lock()
		ok := strings.Contains(s.b.String(), sub)
		w := s.wake
		s.mu.Unlock()
		if ok {
			return true
		}
		select {
		case <-w:
		case <-deadline:
			return false
		}
	}
}

// fileLines waits until path holds at least n lines (at most d) and returns them sorted: the shim
// copies stdout and stderr concurrently, so their interleaving is not part of the contract.
func fileLines(path string, n int, d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		data, err := os.ReadFile(path)
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if err == nil && len(data) > 0 && len(lines) >= n || time.Now().After(deadline) {
			if err != nil {
				return "error: " + err.Error()
			}
			sort.Strings(lines)
			return strings.Join(lines, "|")
		}
		time.Sleep(20 * time.Millisecond) // polling a file for the shim's copy to land in it
	}
}

func (r *Run) scratch(name string) string {
	dir := filepath.Join(r.cfg.WorkDir, r.scenario+"-"+r.label)
	_ = os.MkdirAll(dir, 0o755)
	return filepath.Join(dir, name)
}

// runcOptions is the runc-type runtime options message, understood by both shims.
func runcOptions(o options.Options) *options.Options { return &o }
