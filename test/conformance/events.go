package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd"
	apievents "github.com/containerd/containerd/api/events"
	eventsapi "github.com/containerd/containerd/events"
	"github.com/containerd/containerd/namespaces"
	"github.com/containerd/typeurl"
)

// collector keeps every event of the run's namespaces, in arrival order.
type collector struct {
	mu      sync.Mutex
	evs     []*eventsapi.Envelope
	wake    chan struct{}
	cancels []context.CancelFunc
	errs    []string
}

func newCollector() *collector { return &collector{wake: make(chan struct{})} }

const probeTopic = "/nvconformance/probe"

// subscribe adds a subscription (a new one after a containerd restart) for namespace ns, and
// returns once it is live: a probe event published after subscribing has come back through it.
func (e *collector) subscribe(r *Run, client *containerd.Client, ns string) {
	ctx, cancel := context.WithCancel(namespaces.WithNamespace(context.Background(), ns))
	e.mu.Lock()
	e.cancels = append(e.cancels, cancel)
	e.mu.Unlock()
	ch, errs := client.Subscribe(ctx, fmt.Sprintf(`namespace==%s`, ns))
	go func() {
		for {
			select {
			case env, ok := <-ch:
				if !ok {
					return
				}
				e.mu.Lock()
				e.evs = append(e.evs, env)
				close(e.wake)
				e.wake = make(chan struct{})
				e.mu.Unlock()
			case err, ok := <-errs:
				if ok && err != nil && ctx.Err() == nil {
					e.mu.Lock()
					e.errs = append(e.errs, err.Error())
					e.mu.Unlock()
				}
				return
			}
		}
	}()
	probe := fmt.Sprintf("probe-%s-%d", r.label, time.Now().UnixNano())
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(namespaces.WithNamespace(context.Background(), ns), 2*time.Second)
		_ = client.EventService().Publish(pctx, probeTopic, &apievents.ContainerDelete{ID: probe})
		pcancel()
		if e.waitFor(func(env *eventsapi.Envelope) bool {
			if env.Topic != probeTopic {
				return false
			}
			v, err := typeurl.UnmarshalAny(env.Event)
			d, ok := v.(*apievents.ContainerDelete)
			return err == nil && ok && d.ID == probe
		}, 500*time.Millisecond) {
			return
		}
	}
	r.abort("event subscription in %s never delivered its probe", ns)
}

// waitFor waits until an event matching pred has arrived (at most d).
func (e *collector) waitFor(pred func(*eventsapi.Envelope) bool, d time.Duration) bool {
	deadline := time.After(d)
	seen := 0
	for {
		e.mu.Lock()
		evs := e.evs[seen:]
		w := e.wake
		e.mu.Unlock()
		for _, env := range evs {
			if pred(env) {
				return true
			}
		}
		seen += len(evs)
		select {
		case <-w:
		case <-deadline:
			return false
		}
	}
}

func (e *collector) stop() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, c := range e.cancels {
		c()
	}
}

func (e *collector) snapshot() []*eventsapi.Envelope {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]*eventsapi.Envelope(nil), e.evs...)
}

// taskEvent decodes a /tasks/* event: its container id and the normalized text.
func (r *Run) taskEvent(env *eventsapi.Envelope) (cid, text string, ok bool) {
	if !strings.HasPrefix(env.Topic, "/tasks/") {
		return "", "", false
	}
	v, err := typeurl.UnmarshalAny(env.Event)
	if err != nil {
		return "", env.Topic + "(undecodable)", true
	}
	topic := strings.TrimPrefix(env.Topic, "/tasks/")
	switch e := v.(type) {
	case *apievents.TaskCreate:
		io := "none"
		if e.IO != nil {
			io = fmt.Sprintf("stdin=%s,stdout=%s,stderr=%s,terminal=%v", ioKind(e.IO.Stdin), ioKind(e.IO.Stdout),
				ioKind(e.IO.Stderr), e.IO.Terminal)
		}
		return e.ContainerID, fmt.Sprintf("%s(pid=%s,%s,rootfs=%d,ckpt=%q)", topic, r.role(e.Pid), io,
			len(e.Rootfs), e.Checkpoint), true
	case *apievents.TaskStart:
		return e.ContainerID, fmt.Sprintf("%s(pid=%s)", topic, r.role(e.Pid)), true
	case *apievents.TaskExit:
		id := e.ID
		if id == e.ContainerID {
			id = "init"
		}
		return e.ContainerID, fmt.Sprintf("%s(%s,pid=%s,code=%d,exited_at=%s)", topic, id, r.role(e.Pid),
			e.ExitStatus, zeroness(e.ExitedAt)), true
	case *apievents.TaskDelete:
		id := e.ID
		if id == "" || id == e.ContainerID {
			id = "init"
		}
		return e.ContainerID, fmt.Sprintf("%s(%s,pid=%s,code=%d,exited_at=%s)", topic, id, r.role(e.Pid),
			e.ExitStatus, zeroness(e.ExitedAt)), true
	case *apievents.TaskExecAdded:
		return e.ContainerID, fmt.Sprintf("%s(%s)", topic, e.ExecID), true
	case *apievents.TaskExecStarted:
		return e.ContainerID, fmt.Sprintf("%s(%s,pid=%s)", topic, e.ExecID, r.role(e.Pid)), true
	case *apievents.TaskOOM:
		return e.ContainerID, topic, true
	case *apievents.TaskPaused:
		return e.ContainerID, topic, true
	case *apievents.TaskResumed:
		return e.ContainerID, topic, true
	case *apievents.TaskCheckpointed:
		return e.ContainerID, topic, true
	}
	return "", env.Topic + "(unknown type)", true
}

func ioKind(p string) string {
	switch {
	case p == "":
		return "-"
	case strings.HasPrefix(p, "binary://"):
		return "binary"
	case strings.HasPrefix(p, "file://"):
		return "file"
	case strings.Contains(p, "://"):
		return "uri"
	}
	return "fifo"
}

func (r *Run) role(pid uint32) string {
	if pid == 0 {
		return "0"
	}
	if n, ok := r.roles[pid]; ok {
		return n
	}
	return "other"
}

// noteEvents waits for every created task's /tasks/delete (the last event a shim sends for a
// container; at most a step's deadline: a loaded machine delays events by seconds) and notes each
// container's /tasks/* sequence.
func (r *Run) noteEvents() {
	byID := map[string]*Ctr{}
	for _, c := range r.ctrs {
		byID[c.ns+"/"+c.id] = c
	}
	for _, c := range r.ctrs {
		if !c.created {
			continue
		}
		c := c
		r.ev.waitFor(func(env *eventsapi.Envelope) bool {
			if env.Topic != "/tasks/delete" || env.Namespace != c.ns {
				return false
			}
			v, err := typeurl.UnmarshalAny(env.Event)
			d, ok := v.(*apievents.TaskDelete)
			return err == nil && ok && d.ContainerID == c.id && (d.ID == "" || d.ID == c.id)
		}, r.cfg.Step)
		if c.oom {
			r.ev.waitFor(func(env *eventsapi.Envelope) bool {
				if env.Topic != "/tasks/oom" || env.Namespace != c.ns {
					return false
				}
				v, err := typeurl.UnmarshalAny(env.Event)
				o, ok := v.(*apievents.TaskOOM)
				return err == nil && ok && o.ContainerID == c.id
			}, r.cfg.Step)
		}
	}
	seqs := map[*Ctr][]string{}
	for _, env := range r.ev.snapshot() {
		cid, text, ok := r.taskEvent(env)
		if !ok {
			continue
		}
		c := byID[env.Namespace+"/"+cid]
		if c == nil {
			continue
		}
		seqs[c] = append(seqs[c], text)
	}
	for _, c := range r.ctrs {
		s, ooms := splitOOM(sortExecExitRuns(seqs[c]))
		if c.created {
			// The init's /tasks/delete is noted apart (allow.go: containerd 2.3's runc shim
			// sometimes never sends it); it stays in the sequence when it is not the last event.
			switch {
			case len(s) > 0 && strings.HasPrefix(s[len(s)-1], "delete(init,"):
				r.note(c.name+" /tasks/delete", "last: "+s[len(s)-1])
				s = s[:len(s)-1]
			case hasPrefixIn(s, "delete(init,"):
				r.note(c.name+" /tasks/delete", "not last")
			default:
				r.note(c.name+" /tasks/delete", "missing")
			}
		}
		if len(ooms) > 0 {
			s = append(s, "oom")
		}
		if len(s) == 0 {
			r.note(c.name+" events", "(none)")
			continue
		}
		r.note(c.name+" events", strings.Join(s, " "))
	}
	if len(r.ev.errs) > 0 {
		r.msgs["events"] = strings.Join(r.ev.errs, "; ")
	}
}

// sortExecExitRuns sorts each run of consecutive exec exits: execs killed together (their pid
// namespace's init died) are reaped in no particular order; that they all come before the init's
// exit is the contract, and stays checked.
func sortExecExitRuns(seq []string) []string {
	isExecExit := func(e string) bool { return strings.HasPrefix(e, "exit(") && !strings.HasPrefix(e, "exit(init,") }
	out := append([]string(nil), seq...)
	for i := 0; i < len(out); {
		j := i
		for j < len(out) && isExecExit(out[j]) {
			j++
		}
		if j > i+1 {
			sort.Strings(out[i:j])
		}
		if j == i {
			j++
		}
		i = j
	}
	return out
}

// splitOOM takes the /tasks/oom events out (they are compared at the end of the sequence, as one
// "oom"): the kernel's OOM notification and the killed process's exit reach a shim on separate
// paths, in no fixed order, and how many notifications one kill makes depends on when the shim
// reads the eventfd (one event per read, in containerd's runc shim and in ours: two readings of
// one kill gave "oom oom" from the runc shim on a loaded machine).
func splitOOM(seq []string) (rest, ooms []string) {
	for _, e := range seq {
		if e == "oom" {
			ooms = append(ooms, e)
		} else {
			rest = append(rest, e)
		}
	}
	return rest, ooms
}

func hasPrefixIn(seq []string, prefix string) bool {
	for _, e := range seq {
		if strings.HasPrefix(e, prefix) {
			return true
		}
	}
	return false
}
