package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd"
	"github.com/containerd/containerd/cio"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/containerd/oci"
	"github.com/containerd/containerd/runtime/v2/runc/options"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

type scenario struct {
	name, doc string
	fn        func(r *Run)
}

// scenarios, in the order they run. Names are stable: docs/conformance.md and allow.go use them.
var scenarios = []scenario{
	{"init_fifo", "init with stdin/stdout/stderr FIFOs: exit code, exited_at, outputs, statuses", scInitFIFO},
	{"init_nullio", "init with no stdio (cio.NullIO)", scInitNullIO},
	{"init_logfile", "init logging to file:// (cio.LogFile)", scInitLogFile},
	{"init_loguri", "init logging to a file:// URI given by cio.LogURI", scInitLogURI},
	{"init_logbinary", "init logging through a binary:// logger (cio.BinaryIO)", scInitLogBinary},
	{"init_terminal", "init with a terminal: tty, ResizePty, stdin", scInitTerminal},
	{"exec_fifo", "exec with FIFOs and stdin", func(r *Run) { scExec(r, "fifo") }},
	{"exec_nullio", "exec with no stdio", func(r *Run) { scExec(r, "null") }},
	{"exec_logfile", "exec logging to file://", func(r *Run) { scExec(r, "file") }},
	{"exec_logbinary", "exec logging through binary://", func(r *Run) { scExec(r, "binary") }},
	{"exec_terminal", "exec with a terminal, ResizePty", func(r *Run) { scExec(r, "tty") }},
	{"exec_noterminal", "exec with terminal=false: no tty on its stdio", func(r *Run) { scExec(r, "notty") }},
	{"exit_before_wait", "Wait and Status after the process already exited (init and exec)", scExitBeforeWait},
	{"pids", "Pids with the exec's ProcessDetails", scPids},
	{"metrics", "Stats/Metrics: type URL and cgroup fields", scMetrics},
	{"update", "Update of memory limit and CPU shares, then of a stopped task", scUpdate},
	{"resize_noterminal", "ResizePty on a task and an exec without a terminal", scResizeNoTerminal},
	{"closeio", "CloseIO: stdin EOF reaches cat (init and exec)", scCloseIO},
	{"kill_signals", "SIGTERM to a trapping init, kill of an exec, kill after exit, unknown exec", scKillSignals},
	{"kill_created", "SIGKILL of a created, never started task", scKillCreated},
	{"errors", "error classes: start twice, delete running, duplicate exec, ops after delete", scErrors},
	{"pause_resume", "Pause and Resume: statuses and events", scPauseResume},
	{"force_delete_running", "task.Delete(WithProcessKill) of a running task", scForceDeleteRunning},
	{"runc_delete_running", "runc delete --force behind the shim's back, then Wait and Delete", func(r *Run) { scRuncDelete(r, true) }},
	{"runc_delete_created", "runc delete --force of a created task behind the shim's back", func(r *Run) { scRuncDelete(r, false) }},
	{"exec_exit_order", "SIGKILL of init with running execs: exec exits come before init's", scExecExitOrder},
	{"hostpid_kill", "host pid namespace: killing init kills its children", func(r *Run) { scHostPid(r, hostPidKill) }},
	{"hostpid_killall", "host pid namespace: Kill(WithKillAll)", func(r *Run) { scHostPid(r, hostPidKillAll) }},
	{"hostpid_gone_at_exit", "host pid namespace: init's children are gone when its exit is reported (containerd's TestContainerKillInitPidHost)",
		func(r *Run) { scHostPid(r, hostPidGoneAtExit) }},
	{"long_ids", "76-character namespace and container id (shim socket path)", scLongIDs},
	{"shim_cgroup", "runc options ShimCgroup: the shim process joins it", scShimCgroup},
	{"oom", "a process over its memory limit: exit code and the /tasks/oom event", scOOM},
	{"gpu_request", "a container asking for a GPU (NVIDIA_VISIBLE_DEVICES=all)", scGPURequest},
	{"io_owner", "task options IoUid/IoGid (containerd's TestUserNamespaces) with a process of that uid", scIoOwner},
	{"restore_failed", "a restore from an empty image fails at Start, then the force delete", scRestoreFailed},
	{"daemon_restart", "containerd restart with a running task: status, stdio, exec, kill, delete", scDaemonRestart},
}

func fifoIO(stdin io.Reader, out, errb io.Writer) cio.Creator {
	return cio.NewCreator(cio.WithStreams(stdin, out, errb))
}

// lifecycle runs c's task to the end: wait registered before start, exit, IO drained, status,
// delete; returns after noting everything under "<c> ...".
func (r *Run) lifecycle(c *Ctr, creator cio.Creator) bool {
	if r.newTask(c, creator) != nil {
		return false
	}
	r.status(c.name+" status created", c, c.task)
	ch := r.waitCh(c.name, c, c.task)
	if r.start(c.name, c, c.task, "init") != nil {
		return false
	}
	r.exit(c.name+" exit", ch)
	r.ioWait(c.name+" io", c.task.IO())
	r.status(c.name+" status exited", c, c.task)
	return true
}

func (r *Run) finish(c *Ctr) {
	t := c.task
	r.del(c.name+" delete", c, t)
	r.status(c.name+" status deleted", c, t)
}

func scInitFIFO(r *Run) {
	out, errb := newBuf(), newBuf()
	c := r.container([]string{"sh", "-c", `read l; echo "out:$l"; echo err >&2; exit 3`}, nil)
	if r.lifecycle(c, fifoIO(strings.NewReader("hi\n"), out, errb)) {
		r.note("stdout", "%q", out.String())
		r.note("stderr", "%q", errb.String())
		r.finish(c)
	}
	// A process that exits at once, Wait registered before Start.
	c2 := r.container([]string{"true"}, nil)
	if r.lifecycle(c2, fifoIO(nil, newBuf(), newBuf())) {
		r.finish(c2)
	}
}

func scInitNullIO(r *Run) {
	c := r.container([]string{"sh", "-c", "exit 5"}, nil)
	if r.lifecycle(c, cio.NullIO) {
		r.finish(c)
	}
}

func (r *Run) logFileScenario(creator func(path string) cio.Creator) {
	path := r.scratch("log")
	c := r.container([]string{"sh", "-c", "echo out; echo err >&2; exit 2"}, nil)
	if r.lifecycle(c, creator(path)) {
		r.note("log lines (sorted)", fileLines(path, 2, r.cfg.Step))
		r.finish(c)
	}
}

func scInitLogFile(r *Run) { r.logFileScenario(cio.LogFile) }

func scInitLogURI(r *Run) {
	r.logFileScenario(func(path string) cio.Creator {
		return cio.LogURI(&url.URL{Scheme: "file", Path: path})
	})
}

func scInitLogBinary(r *Run) {
	r.logFileScenario(func(path string) cio.Creator {
		return cio.BinaryIO(r.cfg.Logger, map[string]string{"file": path})
	})
}

func scInitTerminal(r *Run) {
	out := newBuf()
	inR, inW := io.Pipe()
	defer inW.Close()
	c := r.container([]string{"sh", "-c", `[ -t 0 ] && echo tty-in; [ -t 1 ] && echo tty-out; read l; stty size; echo "got:$l"; exit 2`},
		[]oci.SpecOpts{oci.WithTTY})
	if r.newTask(c, cio.NewCreator(cio.WithStreams(inR, out, nil), cio.WithTerminal)) != nil {
		return
	}
	r.call("resize created", func(ctx context.Context) error { return c.task.Resize(ctx, 100, 40) })
	ch := r.waitCh(c.name, c, c.task)
	if r.start(c.name, c, c.task, "init") != nil {
		return
	}
	r.note("tty before read", "%v", out.waitFor("tty-out", r.cfg.Step))
	r.call("resize running", func(ctx context.Context) error { return c.task.Resize(ctx, 90, 30) })
	r.write("stdin write", inW, "x\n")
	r.exit(c.name+" exit", ch)
	r.ioWait(c.name+" io", c.task.IO())
	r.note("output", "%q", strings.ReplaceAll(out.String(), "\r\n", "\n"))
	r.call("resize exited", func(ctx context.Context) error { return c.task.Resize(ctx, 80, 24) })
	r.finish(c)
}

// write writes s to w within the step deadline (a FIFO nobody reads would block forever).
func (r *Run) write(key string, w io.Writer, s string) { r.writeWithin(key, w, s, r.cfg.Step) }

func (r *Run) writeWithin(key string, w io.Writer, s string, d time.Duration) {
	done := make(chan error, 1)
	go func() { _, err := io.WriteString(w, s); done <- err }()
	select {
	case err := <-done:
		r.note(key, class(err))
	case <-time.After(d):
		r.note(key, "TIMEOUT")
	}
}

// sleeper is a running container whose init sleeps, with its stdout captured.
func (r *Run) sleeper(specOpts ...oci.SpecOpts) (*Ctr, <-chan containerd.ExitStatus) {
	out := newBuf()
	c := r.container([]string{"sh", "-c", "echo ready; exec sleep 1000"}, specOpts)
	r.must(c.name+" create", r.newTask(c, fifoIO(nil, out, out)))
	ch := r.waitCh(c.name, c, c.task)
	r.must(c.name+" start", r.start(c.name, c, c.task, "init"))
	r.note(c.name+" ready", "%v", out.waitFor("ready", r.cfg.Step))
	return c, ch
}

// stopSleeper kills, waits for and deletes a sleeper's task.
func (r *Run) stopSleeper(c *Ctr, ch <-chan containerd.ExitStatus) {
	r.call(c.name+" kill", func(ctx context.Context) error { return c.task.Kill(ctx, syscall.SIGKILL) })
	r.exit(c.name+" exit", ch)
	r.finish(c)
}

func scExec(r *Run, shape string) {
	c, ch := r.sleeper()
	out, errb := newBuf(), newBuf()
	inR, inW := io.Pipe()
	defer inW.Close()
	path := r.scratch("exec-log")
	var creator cio.Creator
	terminal := false
	script := `read l; echo "out:$l"; echo err >&2; exit 6`
	switch shape {
	case "fifo":
		creator = fifoIO(inR, out, errb)
	case "null":
		creator = cio.NullIO
		script = "exit 7"
	case "file":
		creator = cio.LogFile(path)
		script = "echo out; echo err >&2; exit 6"
	case "binary":
		creator = cio.BinaryIO(r.cfg.Logger, map[string]string{"file": path})
		script = "echo out; echo err >&2; exit 6"
	case "tty":
		terminal = true
		creator = cio.NewCreator(cio.WithStreams(inR, out, nil), cio.WithTerminal)
		script = `[ -t 0 ] && echo tty-in; [ -t 1 ] && echo tty-out; read l; stty size; exit 6`
	case "notty":
		creator = fifoIO(nil, out, errb)
		script = `[ -t 0 ] && echo tty-in || echo no-tty-in; [ -t 1 ] && echo tty-out || echo no-tty-out; ` +
			`[ -t 2 ] && echo tty-err || echo no-tty-err; exit 6`
	}
	spec := r.execSpec(c, terminal, "sh", "-c", script)
	var p containerd.Process
	err := r.call("exec", func(ctx context.Context) error {
		var err error
		p, err = c.task.Exec(ctx, "e1", spec, creator)
		return err
	})
	if err == nil {
		r.status("exec status created", c, p)
		ech := r.waitCh("exec", c, p)
		if r.start("exec", c, p, "e1") == nil {
			switch shape {
			case "fifo":
				r.write("exec stdin write", inW, "hi\n")
			case "tty":
				r.note("exec tty before read", "%v", out.waitFor("tty-out", r.cfg.Step))
				r.call("exec resize", func(ctx context.Context) error { return p.Resize(ctx, 90, 30) })
				r.write("exec stdin write", inW, "x\n")
			}
			r.exit("exec exit", ech)
			r.ioWait("exec io", p.IO())
			switch shape {
			case "fifo", "notty":
				r.note("exec stdout", "%q", out.String())
				r.note("exec stderr", "%q", errb.String())
			case "tty":
				r.note("exec output", "%q", strings.ReplaceAll(out.String(), "\r\n", "\n"))
			case "file", "binary":
				r.note("exec log lines (sorted)", fileLines(path, 2, r.cfg.Step))
			}
			r.status("exec status exited", c, p)
			r.del("exec delete", c, p)
			r.status("exec status deleted", c, p)
		}
	}
	r.stopSleeper(c, ch)
}

// waitExitEvent waits for the /tasks/exit of c's process id (init: "") without a Wait call.
func (r *Run) waitExitEvent(key string, c *Ctr, execID string) {
	id := execID
	if id == "" {
		id = c.id
	}
	ok := r.ev.waitFor(func(env *eventsEnvelope) bool {
		cid, text, isTask := r.taskEvent(env)
		return isTask && cid == c.id && strings.HasPrefix(text, "exit(") && r.exitEventFor(env, id)
	}, r.cfg.Step)
	r.note(key, "%v", ok)
}

func scExitBeforeWait(r *Run) {
	c := r.container([]string{"sh", "-c", "exit 4"}, nil)
	if r.newTask(c, fifoIO(nil, newBuf(), newBuf())) != nil {
		return
	}
	if r.start(c.name, c, c.task, "init") != nil {
		return
	}
	r.waitExitEvent("init exit event", c, "")
	ch := r.waitCh(c.name+" late", c, c.task)
	r.exit(c.name+" late exit", ch)
	r.status(c.name+" status exited", c, c.task)
	r.finish(c)

	s, sch := r.sleeper()
	spec := r.execSpec(s, false, "sh", "-c", "exit 9")
	var p containerd.Process
	if r.call("exec", func(ctx context.Context) error {
		var err error
		p, err = s.task.Exec(ctx, "e1", spec, fifoIO(nil, newBuf(), newBuf()))
		return err
	}) == nil && r.start("exec", s, p, "e1") == nil {
		r.waitExitEvent("exec exit event", s, "e1")
		ech := r.waitCh("exec late", s, p)
		r.exit("exec late exit", ech)
		r.status("exec status exited", s, p)
		r.del("exec delete", s, p)
	}
	r.stopSleeper(s, sch)
}

func scPids(r *Run) {
	out := newBuf()
	c := r.container([]string{"sh", "-c", "sleep 1000 & echo ready; wait"}, nil)
	r.must("create", r.newTask(c, fifoIO(nil, out, out)))
	ch := r.waitCh(c.name, c, c.task)
	r.must("start", r.start(c.name, c, c.task, "init"))
	r.note("ready", "%v", out.waitFor("ready", r.cfg.Step))
	spec := r.execSpec(c, false, "sleep", "1000")
	var p containerd.Process
	if r.call("exec", func(ctx context.Context) error {
		var err error
		p, err = c.task.Exec(ctx, "e1", spec, fifoIO(nil, newBuf(), newBuf()))
		return err
	}) == nil {
		r.start("exec", c, p, "e1")
	}
	var infos []containerd.ProcessInfo
	if r.call("pids", func(ctx context.Context) error {
		var err error
		infos, err = c.task.Pids(ctx)
		return err
	}) == nil {
		var roles []string
		for _, in := range infos {
			role := r.role(in.Pid)
			if in.Info != nil {
				role += "+info(" + in.Info.GetTypeUrl() + "," + r.detailsExecID(in) + ")"
			}
			roles = append(roles, role)
		}
		sort.Strings(roles)
		r.note("pids list", "n=%d %s", len(infos), strings.Join(roles, " "))
	}
	r.stopSleeper(c, ch)
}

func scMetrics(r *Run) {
	c, ch := r.sleeper()
	r.metrics("metrics running", c)
	r.call(c.name+" kill", func(ctx context.Context) error { return c.task.Kill(ctx, syscall.SIGKILL) })
	r.exit(c.name+" exit", ch)
	r.call("metrics stopped", func(ctx context.Context) error {
		_, err := c.task.Metrics(ctx)
		return err
	})
	r.finish(c)
}

func scUpdate(r *Run) {
	c, ch := r.sleeper()
	shares := uint64(512)
	limit := int64(64 << 20)
	r.call("update", func(ctx context.Context) error {
		return c.task.Update(ctx, containerd.WithResources(&specs.LinuxResources{
			Memory: &specs.LinuxMemory{Limit: &limit},
			CPU:    &specs.LinuxCPU{Shares: &shares},
		}))
	})
	r.note("cgroup memory limit", cgroupValue(c, "memory", "memory.limit_in_bytes", "memory.max"))
	r.note("cgroup cpu shares", cgroupValue(c, "cpu", "cpu.shares", "cpu.weight"))
	r.metricsLimit("metrics memory limit", c)
	r.call(c.name+" kill", func(ctx context.Context) error { return c.task.Kill(ctx, syscall.SIGKILL) })
	r.exit(c.name+" exit", ch)
	r.call("update stopped", func(ctx context.Context) error {
		return c.task.Update(ctx, containerd.WithResources(&specs.LinuxResources{Memory: &specs.LinuxMemory{Limit: &limit}}))
	})
	r.finish(c)
}

func scResizeNoTerminal(r *Run) {
	c, ch := r.sleeper()
	r.call("resize task", func(ctx context.Context) error { return c.task.Resize(ctx, 80, 24) })
	spec := r.execSpec(c, false, "sleep", "1000")
	var p containerd.Process
	if r.call("exec", func(ctx context.Context) error {
		var err error
		p, err = c.task.Exec(ctx, "e1", spec, fifoIO(nil, newBuf(), newBuf()))
		return err
	}) == nil && r.start("exec", c, p, "e1") == nil {
		r.call("resize exec", func(ctx context.Context) error { return p.Resize(ctx, 80, 24) })
		ech := r.waitCh("exec", c, p)
		r.call("exec kill", func(ctx context.Context) error { return p.Kill(ctx, syscall.SIGKILL) })
		r.exit("exec exit", ech)
		r.call("resize exec exited", func(ctx context.Context) error { return p.Resize(ctx, 80, 24) })
		r.del("exec delete", c, p)
	}
	r.stopSleeper(c, ch)
}

func scCloseIO(r *Run) {
	out := newBuf()
	inR, inW := io.Pipe()
	defer inW.Close()
	c := r.container([]string{"cat"}, nil)
	r.must("create", r.newTask(c, fifoIO(inR, out, out)))
	ch := r.waitCh(c.name, c, c.task)
	r.must("start", r.start(c.name, c, c.task, "init"))
	r.write("stdin write", inW, "abc\n")
	r.note("echoed", "%v", out.waitFor("abc", r.cfg.Step))
	r.call("closeio", func(ctx context.Context) error { return c.task.CloseIO(ctx, containerd.WithStdinCloser) })
	// runc's shim keeps its own writer on the stdin FIFO until CloseIO and the process sees EOF
	// only when the client closes its end too: a line written after CloseIO still reaches cat.
	r.writeWithin("stdin write after closeio", inW, "more\n", 5*time.Second)
	r.note("echoed after closeio", "%v", out.waitFor("more", 5*time.Second))
	inW.Close()
	r.exit(c.name+" exit", ch)
	r.ioWait(c.name+" io", c.task.IO())
	r.note("stdout", "%q", out.String())
	r.finish(c)

	s, sch := r.sleeper()
	eout := newBuf()
	eR, eW := io.Pipe()
	defer eW.Close()
	spec := r.execSpec(s, false, "cat")
	var p containerd.Process
	if r.call("exec", func(ctx context.Context) error {
		var err error
		p, err = s.task.Exec(ctx, "e1", spec, fifoIO(eR, eout, eout))
		return err
	}) == nil {
		ech := r.waitCh("exec", s, p)
		if r.start("exec", s, p, "e1") == nil {
			r.write("exec stdin write", eW, "def\n")
			r.note("exec echoed", "%v", eout.waitFor("def", r.cfg.Step))
			eW.Close() // the client's stdin ends (cio closes its FIFO end), then CloseIO, as ctr does
			r.call("exec closeio", func(ctx context.Context) error { return p.CloseIO(ctx, containerd.WithStdinCloser) })
			r.exit("exec exit", ech)
			r.note("exec stdout", "%q", eout.String())
			r.del("exec delete", s, p)
		}
	}
	r.stopSleeper(s, sch)
}

func scKillSignals(r *Run) {
	out := newBuf()
	c := r.container([]string{"sh", "-c", `trap "exit 42" TERM; echo ready; while :; do sleep 0.1; done`}, nil)
	r.must("create", r.newTask(c, fifoIO(nil, out, out)))
	ch := r.waitCh(c.name, c, c.task)
	r.must("start", r.start(c.name, c, c.task, "init"))
	r.note("ready", "%v", out.waitFor("ready", r.cfg.Step))
	spec := r.execSpec(c, false, "sleep", "1000")
	var p containerd.Process
	if r.call("exec", func(ctx context.Context) error {
		var err error
		p, err = c.task.Exec(ctx, "e1", spec, fifoIO(nil, newBuf(), newBuf()))
		return err
	}) == nil {
		ech := r.waitCh("exec", c, p)
		if r.start("exec", c, p, "e1") == nil {
			r.call("exec kill TERM", func(ctx context.Context) error { return p.Kill(ctx, syscall.SIGTERM) })
			r.exit("exec exit", ech)
			r.call("exec kill after exit", func(ctx context.Context) error { return p.Kill(ctx, syscall.SIGKILL) })
			r.del("exec delete", c, p)
			r.call("exec kill after delete", func(ctx context.Context) error { return p.Kill(ctx, syscall.SIGKILL) })
		}
	}
	r.call("kill unknown exec", func(ctx context.Context) error {
		return c.task.Kill(ctx, syscall.SIGKILL, containerd.WithKillExecID("nope"))
	})
	r.call("kill signal 0", func(ctx context.Context) error { return c.task.Kill(ctx, 0) })
	r.call("kill TERM", func(ctx context.Context) error { return c.task.Kill(ctx, syscall.SIGTERM) })
	r.exit(c.name+" exit", ch)
	r.call("kill after exit", func(ctx context.Context) error { return c.task.Kill(ctx, syscall.SIGKILL) })
	r.call("kill all after exit", func(ctx context.Context) error {
		return c.task.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll)
	})
	r.finish(c)
}

func scKillCreated(r *Run) {
	c := r.container([]string{"sleep", "1000"}, nil)
	r.must("create", r.newTask(c, fifoIO(nil, newBuf(), newBuf())))
	ch := r.waitCh(c.name, c, c.task)
	r.call("kill created", func(ctx context.Context) error { return c.task.Kill(ctx, syscall.SIGKILL) })
	r.exit(c.name+" exit", ch)
	r.status(c.name+" status", c, c.task)
	r.call("start after kill", func(ctx context.Context) error { return c.task.Start(ctx) })
	r.finish(c)
	// A created task deleted without a kill.
	c2 := r.container([]string{"sleep", "1000"}, nil)
	r.must("create", r.newTask(c2, fifoIO(nil, newBuf(), newBuf())))
	r.del(c2.name+" delete created", c2, c2.task)
}

func scErrors(r *Run) {
	c, ch := r.sleeper()
	r.call("start again", func(ctx context.Context) error { return c.task.Start(ctx) })
	r.call("delete running", func(ctx context.Context) error {
		_, err := c.task.Delete(ctx)
		return err
	})
	r.status("status after refused delete", c, c.task)
	r.call("new task while one exists", func(ctx context.Context) error {
		_, err := c.c.NewTask(ctx, cio.NullIO)
		return err
	})
	spec := r.execSpec(c, false, "sleep", "1000")
	var p containerd.Process
	if r.call("exec", func(ctx context.Context) error {
		var err error
		p, err = c.task.Exec(ctx, "e1", spec, fifoIO(nil, newBuf(), newBuf()))
		return err
	}) == nil {
		r.call("exec duplicate id", func(ctx context.Context) error {
			_, err := c.task.Exec(ctx, "e1", spec, fifoIO(nil, newBuf(), newBuf()))
			return err
		})
		r.call("exec bad id", func(ctx context.Context) error {
			_, err := c.task.Exec(ctx, "bad/id", spec, cio.NullIO)
			return err
		})
		r.status("exec status created", c, p)
		r.call("exec kill before start", func(ctx context.Context) error { return p.Kill(ctx, syscall.SIGKILL) })
		ech := r.waitCh("exec", c, p)
		if r.start("exec", c, p, "e1") == nil {
			r.call("exec delete running", func(ctx context.Context) error {
				_, err := p.Delete(ctx)
				return err
			})
			r.call("exec kill", func(ctx context.Context) error { return p.Kill(ctx, syscall.SIGKILL) })
			r.exit("exec exit", ech)
			r.del("exec delete", c, p)
			r.del("exec delete again", c, p)
			r.status("exec status deleted", c, p)
		}
	}
	// Start's error path waits for the exec's stdio to close: a FIFO the shim keeps open hangs it.
	for i, creator := range []cio.Creator{fifoIO(nil, newBuf(), newBuf()), cio.NullIO} {
		key := []string{"exec missing binary", "exec missing binary (no stdio)"}[i]
		var q containerd.Process
		if r.call(key, func(ctx context.Context) error {
			var err error
			q, err = c.task.Exec(ctx, fmt.Sprintf("e-missing-%d", i), r.execSpec(c, false, "/no/such/binary"), creator)
			if err != nil {
				return err
			}
			return q.Start(ctx)
		}) != nil && q != nil {
			r.del(key+" delete", c, q)
		}
	}
	r.call("load unknown exec", func(ctx context.Context) error {
		_, err := c.task.LoadProcess(ctx, "nope", nil)
		return err
	})
	t := c.task
	r.stopSleeper(c, ch)
	r.call("kill after delete", func(ctx context.Context) error { return t.Kill(ctx, syscall.SIGKILL) })
	r.call("start after delete", func(ctx context.Context) error { return t.Start(ctx) })
	r.call("delete after delete", func(ctx context.Context) error {
		_, err := t.Delete(ctx)
		return err
	})
	r.call("wait after delete", func(ctx context.Context) error {
		_, err := t.Wait(ctx)
		return err
	})
	r.call("load task after delete", func(ctx context.Context) error {
		_, err := c.c.Task(ctx, nil)
		return err
	})
}

func scPauseResume(r *Run) {
	c, ch := r.sleeper()
	r.call("pause", func(ctx context.Context) error { return c.task.Pause(ctx) })
	r.status("status paused", c, c.task)
	r.call("pause again", func(ctx context.Context) error { return c.task.Pause(ctx) })
	r.call("resume", func(ctx context.Context) error { return c.task.Resume(ctx) })
	r.status("status resumed", c, c.task)
	r.call("resume running", func(ctx context.Context) error { return c.task.Resume(ctx) })
	r.stopSleeper(c, ch)
}

func scForceDeleteRunning(r *Run) {
	c, _ := r.sleeper()
	spec := r.execSpec(c, false, "sleep", "1000")
	var p containerd.Process
	if r.call("exec", func(ctx context.Context) error {
		var err error
		p, err = c.task.Exec(ctx, "e1", spec, fifoIO(nil, newBuf(), newBuf()))
		return err
	}) == nil {
		r.start("exec", c, p, "e1")
	}
	r.del("force delete", c, c.task, containerd.WithProcessKill)
	r.call("load task after", func(ctx context.Context) error {
		_, err := c.c.Task(ctx, nil)
		return err
	})
}

// scRuncDelete removes the container with runc behind the shim's back, then does what a client
// does when it finds out: Wait, Status, Delete.
func scRuncDelete(r *Run, started bool) {
	c := r.container([]string{"sh", "-c", "echo ready; exec sleep 1000"}, nil)
	out := newBuf()
	r.must("create", r.newTask(c, fifoIO(nil, out, out)))
	ch := r.waitCh(c.name, c, c.task)
	if started {
		r.must("start", r.start(c.name, c, c.task, "init"))
		r.note("ready", "%v", out.waitFor("ready", r.cfg.Step))
	}
	r.note("runc delete --force", r.runcDelete(c))
	r.exit(c.name+" exit", ch)
	r.status(c.name+" status", c, c.task)
	r.del(c.name+" delete", c, c.task)
	r.call("load task after", func(ctx context.Context) error {
		_, err := c.c.Task(ctx, nil)
		return err
	})
}

func scExecExitOrder(r *Run) {
	c, ch := r.sleeper()
	var echs []<-chan containerd.ExitStatus
	for _, id := range []string{"e1", "e2"} {
		spec := r.execSpec(c, false, "sleep", "1000")
		var p containerd.Process
		if r.call(id+" exec", func(ctx context.Context) error {
			var err error
			p, err = c.task.Exec(ctx, id, spec, fifoIO(nil, newBuf(), newBuf()))
			return err
		}) == nil {
			echs = append(echs, r.waitCh(id, c, p))
			r.start(id, c, p, id)
		}
	}
	r.call("kill init", func(ctx context.Context) error { return c.task.Kill(ctx, syscall.SIGKILL) })
	r.exit(c.name+" exit", ch)
	for i, ech := range echs {
		r.exit(fmt.Sprintf("e%d exit", i+1), ech)
	}
	r.finish(c)
}

type hostPidMode int

const (
	hostPidKill       hostPidMode = iota // SIGKILL to init; its children gone within 5 s
	hostPidKillAll                       // Kill(WithKillAll)
	hostPidGoneAtExit                    // SIGKILL to init; its child gone the moment Wait answers
)

func scHostPid(r *Run, mode hostPidMode) {
	out := newBuf()
	args := []string{"sh", "-c", "sleep 1000 & sleep 1000 & echo ready; wait"}
	if mode == hostPidGoneAtExit { // one child in the foreground, as in containerd's client test
		args = []string{"sh", "-c", "sleep 1042 & echo ready; wait; echo hi"}
	}
	c := r.container(args, []oci.SpecOpts{oci.WithHostNamespace(specs.PIDNamespace)})
	r.must("create", r.newTask(c, fifoIO(nil, out, out)))
	ch := r.waitCh(c.name, c, c.task)
	r.must("start", r.start(c.name, c, c.task, "init"))
	r.note("ready", "%v", out.waitFor("ready", r.cfg.Step))
	var children []uint32
	r.call("pids", func(ctx context.Context) error {
		infos, err := c.task.Pids(ctx)
		for _, in := range infos {
			if in.Pid != c.task.Pid() {
				children = append(children, in.Pid)
			}
		}
		return err
	})
	r.note("children", "%d", len(children))
	if mode == hostPidKillAll {
		r.call("kill all", func(ctx context.Context) error {
			return c.task.Kill(ctx, syscall.SIGKILL, containerd.WithKillAll)
		})
	} else {
		r.call("kill init", func(ctx context.Context) error { return c.task.Kill(ctx, syscall.SIGKILL) })
	}
	r.exit(c.name+" exit", ch)
	if mode == hostPidGoneAtExit {
		r.note("children gone at exit", "%s", waitGone(children, 0))
	} else {
		r.note("children gone", "%s", waitGone(children, 5*time.Second))
	}
	r.finish(c)
	for _, pid := range children { // never leave them to the host
		_ = syscall.Kill(int(pid), syscall.SIGKILL)
	}
}

// waitGone waits until none of pids is alive; "yes" or how many remain. A process counts as gone
// once it is a zombie, is exiting, or has a SIGKILL pending: a kill delivered before Wait answered
// is what the order asks for, and its delivery on a loaded machine is the scheduler's, not the shim's.
func waitGone(pids []uint32, d time.Duration) string {
	deadline := time.Now().Add(d)
	for {
		alive := 0
		for _, pid := range pids {
			if !killedOrGone(pid) {
				alive++
			}
		}
		if alive == 0 {
			return "yes"
		}
		if time.Now().After(deadline) {
			return fmt.Sprintf("no: %d still alive after %s", alive, d)
		}
		time.Sleep(20 * time.Millisecond) // polling /proc: the kernel sends no event for another's child
	}
}

const pfExiting = 0x4 // the kernel's PF_EXITING task flag (/proc/PID/stat field 9)

func killedOrGone(pid uint32) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	f := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+1:]))
	if len(f) < 7 || f[0] == "Z" || f[0] == "X" {
		return true
	}
	if flags, err := strconv.ParseUint(f[6], 10, 64); err == nil && flags&pfExiting != 0 {
		return true
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return true
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "SigPnd" && k != "ShdPnd") {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&(1<<(uint(syscall.SIGKILL)-1)) != 0 {
			return true
		}
	}
	return false
}

func scLongIDs(r *Run) {
	ns := padTo(r.cfg.Namespace+"-long-"+r.label+"-", 76)
	r.note("namespace length", "%d", len(ns))
	ctx := namespaces.WithNamespace(r.ctx, ns)
	r.must("image in long namespace", r.importImage(ns))
	r.ev.subscribe(r, r.client, ns)
	id := padTo(r.id("-"), 76)
	r.note("id length", "%d", len(id))
	c := r.containerIn(ctx, ns, id, nil, []string{"sh", "-c", "echo hello; exit 3"}, nil)
	out := newBuf()
	if r.lifecycle(c, fifoIO(nil, out, out)) {
		r.note("stdout", "%q", out.String())
		r.finish(c)
	}
	s := r.containerIn(ctx, ns, padTo(r.id("-"), 76), nil, []string{"sh", "-c", "echo ready; exec sleep 1000"}, nil)
	sout := newBuf()
	r.must("create", r.newTask(s, fifoIO(nil, sout, sout)))
	sch := r.waitCh(s.name, s, s.task)
	r.must("start", r.start(s.name, s, s.task, "init"))
	r.note(s.name+" ready", "%v", sout.waitFor("ready", r.cfg.Step))
	eout := newBuf()
	spec := r.execSpec(s, false, "echo", "from-exec")
	var p containerd.Process
	if r.call("exec", func(ctx context.Context) error {
		var err error
		p, err = s.task.Exec(namespaces.WithNamespace(ctx, ns), padTo("e", 76), spec, fifoIO(nil, eout, eout))
		return err
	}) == nil {
		ech := r.waitCh("exec", s, p)
		if r.start("exec", s, p, "e-long") == nil {
			r.exit("exec exit", ech)
			r.ioWait("exec io", p.IO())
			r.note("exec stdout", "%q", eout.String())
			r.del("exec delete", s, p)
		}
	}
	r.call(s.name+" kill", func(ctx context.Context) error {
		return s.task.Kill(namespaces.WithNamespace(ctx, ns), syscall.SIGKILL)
	})
	r.exit(s.name+" exit", sch)
	r.finish(s)
}

func padTo(s string, n int) string {
	for len(s) < n {
		s += "x"
	}
	return s[:n]
}

func scGPURequest(r *Run) {
	if _, err := os.Stat("/dev/nvidiactl"); err == nil {
		r.abort("this host has an NVIDIA driver: the refusal on a GPU-less host cannot be observed here")
	}
	c := r.container([]string{"sh", "-c", "exit 0"}, []oci.SpecOpts{oci.WithEnv([]string{"NVIDIA_VISIBLE_DEVICES=all"})})
	if r.lifecycle(c, fifoIO(nil, newBuf(), newBuf())) {
		r.finish(c)
	}
	c2 := r.container([]string{"sh", "-c", "exit 0"}, []oci.SpecOpts{oci.WithEnv([]string{"NVIDIA_VISIBLE_DEVICES=nonsense!"})})
	if r.lifecycle(c2, fifoIO(nil, newBuf(), newBuf())) {
		r.finish(c2)
	}
}

func scOOM(r *Run) {
	// tail keeps /dev/zero's never-ending "line" in memory until the cgroup's limit kills it.
	c := r.container([]string{"tail", "/dev/zero"}, []oci.SpecOpts{oci.WithMemoryLimit(16 << 20)})
	c.oom = true
	if r.lifecycle(c, fifoIO(nil, newBuf(), newBuf())) {
		r.finish(c)
	}
}

// The options containerd's TestUserNamespaces gives NewTask: IoUid/IoGid (runc.v1.Options for
// runc's shim; runctypes.CreateOptions for any other runtime name, ours), which containerd 1.6-2.2
// hand to the shim's `start` on stdin. Create succeeding is the proof that `start` printed its
// address alone: containerd 1.6 and 1.7 dial whatever start writes to stdout and stderr. The
// process runs as that uid and reopens its stdout and stderr, which needs pipes owned by it.
func scIoOwner(r *Run) {
	out, errb := newBuf(), newBuf()
	c := r.container([]string{"sh", "-c",
		`stat -L -c 'fd1 %u:%g' /proc/self/fd/1; echo reopened >/dev/stdout; echo err >/dev/stderr; id -u; exit 4`},
		[]oci.SpecOpts{oci.WithUIDGID(1000, 2000)})
	owner := r.v2Options(options.Options{IoUid: 1000, IoGid: 2000}, containerd.WithUIDOwner(1000), containerd.WithGIDOwner(2000))
	if r.newTask(c, fifoIO(nil, out, errb), owner...) != nil {
		return
	}
	ch := r.waitCh(c.name, c, c.task)
	if r.start(c.name, c, c.task, "init") != nil {
		return
	}
	r.exit(c.name+" exit", ch)
	r.ioWait(c.name+" io", c.task.IO())
	r.note("stdout", "%q", out.String())
	r.note("stderr", "%q", errb.String())
	r.finish(c)
}

// forceDeleteDeadline bounds the force delete of restore_failed: containerd's runc shim never
// ends it (allow.go), ours must be done well within it.
const forceDeleteDeadline = 5 * time.Second

// A restore that fails (WithRestoreImagePath to an empty directory: CRIU finds no image), then what
// `ctr task rm -f`, CRI's cleanup and other clients do: task.Delete(WithProcessKill), which waits
// for the exit after its SIGKILL. Ours ends the task with an exit at the failed Start; runc's
// shim leaves it created with no exit to come, so that delete hangs until its deadline.
func scRestoreFailed(r *Run) {
	image := r.scratch("empty-checkpoint")
	if err := os.MkdirAll(image, 0o755); err != nil {
		r.abort("mkdir %s: %v", image, err)
	}
	c := r.container([]string{"sleep", "30"}, nil)
	if r.newTask(c, cio.NullIO, r.v2Options(options.Options{CriuImagePath: image}, containerd.WithRestoreImagePath(image))...) != nil {
		return
	}
	r.status(c.name+" status created", c, c.task)
	ch := r.waitCh(c.name, c, c.task)
	if r.start(c.name, c, c.task, "init") == nil {
		r.abort("the restore from an empty image succeeded")
	}
	r.status(c.name+" status after failed start", c, c.task)
	key := c.name + " force delete"
	var st *containerd.ExitStatus
	t := c.task
	err := r.doWithin(forceDeleteDeadline, func(ctx context.Context) error {
		var err error
		st, err = t.Delete(namespaces.WithNamespace(ctx, c.ns), containerd.WithProcessKill)
		return err
	})
	if err != nil {
		r.note(key, "error %s", class(err))
		r.msgs[key] = err.Error()
	} else {
		r.note(key, "code=%d exited_at=%s", st.ExitCode(), zeroness(st.ExitTime()))
		c.task = nil
	}
	select {
	case s := <-ch:
		code, at, err := s.Result()
		r.note(c.name+" exit", "code=%d exited_at=%s err=%s", code, zeroness(at), class(err))
	default:
		r.note(c.name+" exit", "none")
	}
	if c.task != nil {
		// A created task with pid 0 deletes without a kill: what is left to do by hand.
		_ = r.do(func(ctx context.Context) error {
			_, err := c.task.Delete(namespaces.WithNamespace(ctx, c.ns))
			return err
		})
	}
}

// daemonMajor is the major version of the containerd the client talks to (0 if unknown).
func (r *Run) daemonMajor() int {
	var v containerd.Version
	if err := r.do(func(ctx context.Context) error {
		var err error
		v, err = r.client.Version(ctx)
		return err
	}); err != nil {
		return 0
	}
	var major int
	fmt.Sscanf(strings.TrimPrefix(v.Version, "v"), "%d", &major)
	return major
}

// v2Options is `opts` (what containerd 1.6's client sends: runctypes.CreateOptions for a runtime
// not named io.containerd.runc*) against containerd 1.x, and `o` as the task options against
// containerd 2: it no longer knows runctypes.CreateOptions (it refuses the Any), and its client
// sends runc.v1.Options whatever the runtime's name.
func (r *Run) v2Options(o options.Options, opts ...containerd.NewTaskOpts) []containerd.NewTaskOpts {
	if r.daemonMajor() < 2 {
		return opts
	}
	return []containerd.NewTaskOpts{func(_ context.Context, _ *containerd.Client, ti *containerd.TaskInfo) error {
		ti.Options = runcOptions(o)
		return nil
	}}
}
