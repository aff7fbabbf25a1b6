// Command nvconformance drives one containerd through its Go client the way buildkit, nerdctl and
// CI systems do, runs every scenario once against containerd's runc shim (io.containerd.runc.v2)
// and once against ours (io.containerd.nvproxy.v1), and compares what the client observed:
// statuses, exit codes, exited_at, error classes, outputs, pids (by role, never by value) and the
// /tasks/* event sequence of every container. Any difference not in the allow-list (allow.go,
// docs/conformance.md) fails the run. Started by run_conformance.sh, which owns the containerd.
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Config is what every scenario run needs from the command line.
type Config struct {
	Address     string
	Namespace   string
	Image       string
	ImageTar    string
	Snapshotter string
	StateDir    string
	Logger      string
	WorkDir     string
	Runc        string
	RuncRoot    string
	Step        time.Duration
	RestartPid  int
	RestartFile string
	Verbose     bool
}

// runtimes under comparison: the reference first.
var runtimes = []struct{ label, name string }{
	{"runc", "io.containerd.runc.v2"},
	{"ours", "io.containerd.nvproxy.v1"},
}

func main() {
	var cfg Config
	var runRe, only string
	var list bool
	flag.StringVar(&cfg.Address, "address", "", "containerd's gRPC socket")
	flag.StringVar(&cfg.Namespace, "namespace", "", "containerd namespace holding -image")
	flag.StringVar(&cfg.Image, "image", "", "image reference (a busybox image)")
	flag.StringVar(&cfg.ImageTar, "image-tar", "", "the image's OCI tarball (imported into the long namespace)")
	flag.StringVar(&cfg.Snapshotter, "snapshotter", "overlayfs", "snapshotter")
	flag.StringVar(&cfg.StateDir, "state", "", "containerd's state dir (for bundles)")
	flag.StringVar(&cfg.Logger, "logger", "", "the binary:// logging program (nvconformance-logger)")
	flag.StringVar(&cfg.WorkDir, "work", "", "scratch dir for log files")
	flag.StringVar(&cfg.Runc, "runc", "runc", "runc binary for the behind-the-shim's-back scenarios")
	flag.StringVar(&cfg.RuncRoot, "runc-root", "/run/containerd/runc", "runc --root of both shims (the namespace is appended)")
	flag.DurationVar(&cfg.Step, "step-timeout", 20*time.Second, "deadline of one client call")
	flag.IntVar(&cfg.RestartPid, "restart-pid", 0, "process that restarts containerd on SIGUSR1 (run_conformance.sh)")
	flag.StringVar(&cfg.RestartFile, "restart-file", "", "file holding the number of restarts done")
	flag.BoolVar(&cfg.Verbose, "v", false, "print error messages and both values of every observation")
	flag.StringVar(&runRe, "run", "", "run only the scenarios whose name matches this regex")
	flag.StringVar(&only, "runtime", "", "run only this runtime label (runc or ours): no comparison, prints observations")
	flag.BoolVar(&list, "list", false, "list the scenarios and exit")
	flag.Parse()

	if list {
		for _, s := range scenarios {
			fmt.Printf("%-24s %s\n", s.name, s.doc)
		}
		return
	}
	for _, req := range []struct{ v, flag string }{{cfg.Address, "address"}, {cfg.Namespace, "namespace"},
		{cfg.Image, "image"}, {cfg.StateDir, "state"}, {cfg.Logger, "logger"}, {cfg.WorkDir, "work"}} {
		if req.v == "" {
			fmt.Fprintf(os.Stderr, "nvconformance: -%s is required\n", req.flag)
			os.Exit(2)
		}
	}
	var re *regexp.Regexp
	if runRe != "" {
		var err error
		if re, err = regexp.Compile(runRe); err != nil {
			fmt.Fprintf(os.Stderr, "nvconformance: -run: %v\n", err)
			os.Exit(2)
		}
	}

	failed := 0
	ran := 0
	var summary []string
	for _, s := range scenarios {
		if re != nil && !re.MatchString(s.name) {
			continue
		}
		ran++
		results := map[string]*Run{}
		for _, rt := range runtimes {
			if only != "" && rt.label != only {
				continue
			}
			start := time.Now()
			r := runScenario(&cfg, s, rt.label, rt.name)
			logf("%s on %s: %d observations in %.1fs", s.name, rt.label, len(r.obs), time.Since(start).Seconds())
			results[rt.label] = r
		}
		if only != "" {
			printSingle(s.name, results[only], cfg.Verbose)
			continue
		}
		rows := compare(s.name, results["runc"], results["ours"])
		bad := printTable(s.name, rows, results["runc"], results["ours"], cfg.Verbose)
		oneSided := 0
		for _, row := range rows {
			if row.verdict != verdictDiff && row.verdict != verdictAllowBroken {
				continue
			}
			if row.runc == missing || row.ours == missing { // steps skipped after an earlier difference
				oneSided++
				continue
			}
			summary = append(summary, fmt.Sprintf("%s: %s: runc=%s ours=%s", s.name, row.key,
				short(row.runc, 60), short(row.ours, 60)))
		}
		if oneSided > 0 {
			summary = append(summary, fmt.Sprintf("%s: (+%d steps observed with one shim only)", s.name, oneSided))
		}
		if bad > 0 {
			failed++
		}
	}
	if ran == 0 {
		fmt.Fprintf(os.Stderr, "nvconformance: no scenario matches -run %q\n", runRe)
		os.Exit(2)
	}
	if only != "" {
		return
	}
	fmt.Printf("\n== %d scenarios, %d with differences outside the allow-list\n", ran, failed)
	sort.Strings(summary)
	for _, l := range summary {
		fmt.Println("  DIFF " + l)
	}
	if failed > 0 {
		os.Exit(1)
	}
}

func logf(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "[conformance %s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func short(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", "⏎")
	if len([]rune(s)) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}
