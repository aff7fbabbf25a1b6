package main

import (
	"fmt"
	"regexp"
	"strings"
)

type verdict string

const (
	verdictSame        verdict = "same"
	verdictDiff        verdict = "DIFF"
	verdictAllowed     verdict = "allowed"
	verdictAllowBroken verdict = "ALLOW-MISMATCH" // an allow-listed difference that did not look as documented
)

type row struct {
	key, runc, ours string
	verdict         verdict
	why             string
}

// allowance: a difference our shim must show, or a reference flaw it must not copy
// (docs/conformance.md). Ours must always match Ours; when the values differ, runc's must match
// Runc. Anything else fails the row as ALLOW-MISMATCH.
type allowance struct {
	Scenario, Key string // regexes, anchored
	Runc, Ours    string // regexes, anchored
	Why           string
}

func (a allowance) matches(scenario, key string) bool {
	return anchored(a.Scenario).MatchString(scenario) && anchored(a.Key).MatchString(key)
}

func anchored(re string) *regexp.Regexp { return regexp.MustCompile("^(?:" + re + ")$") }

const missing = "(not observed)"

// compare lines up the observations of both runs by key, in the reference run's order (keys only
// the other run has come after those, in its order).
func compare(scenario string, ref, ours *Run) []row {
	var keys []string
	seen := map[string]bool{}
	for _, r := range []*Run{ref, ours} {
		for _, o := range r.obs {
			if !seen[o.key] {
				seen[o.key] = true
				keys = append(keys, o.key)
			}
		}
	}
	var rows []row
	for _, k := range keys {
		a, b := ref.value(k), ours.value(k)
		rw := row{key: k, runc: a, ours: b, verdict: verdictSame}
		for _, al := range allowList {
			if !al.matches(scenario, k) {
				continue
			}
			rw.why = al.Why
			switch {
			case !anchored(al.Ours).MatchString(b): // ours is always held to the documented value
				rw.verdict = verdictAllowBroken
			case a == b:
			case anchored(al.Runc).MatchString(a):
				rw.verdict = verdictAllowed
			default:
				rw.verdict = verdictAllowBroken
			}
			break
		}
		if rw.why == "" && a != b {
			rw.verdict = verdictDiff
		}
		rows = append(rows, rw)
	}
	return rows
}

// printTable prints one scenario's table and returns the number of failing rows.
func printTable(scenario string, rows []row, ref, ours *Run, verbose bool) int {
	bad := 0
	for _, r := range rows {
		if r.verdict == verdictDiff || r.verdict == verdictAllowBroken {
			bad++
		}
	}
	status := "PASS"
	if bad > 0 {
		status = fmt.Sprintf("FAIL (%d)", bad)
	}
	fmt.Printf("\n=== %s: %s\n", scenario, status)
	fmt.Printf("%-34s | %-40s | %-40s | %s\n", "observation", "runc shim", "ours", "verdict")
	fmt.Println(strings.Repeat("-", 34) + "-+-" + strings.Repeat("-", 40) + "-+-" + strings.Repeat("-", 40) + "-+--------")
	told := map[string]bool{}
	for _, r := range rows {
		fmt.Printf("%-34s | %-40s | %-40s | %s\n", short(r.key, 34), short(r.runc, 40), short(r.ours, 40), r.verdict)
		if r.verdict != verdictSame && (verbose || len([]rune(r.runc)) > 40 || len([]rune(r.ours)) > 40) {
			fmt.Printf("    runc: %s\n    ours: %s\n", strings.ReplaceAll(r.runc, "\n", "⏎"), strings.ReplaceAll(r.ours, "\n", "⏎"))
		}
		if r.why != "" && r.verdict != verdictSame && (!told[r.why] || r.verdict == verdictAllowBroken) {
			told[r.why] = true
			fmt.Printf("    allowed because: %s\n", r.why)
		}
		if verbose || r.verdict == verdictDiff {
			for _, x := range []struct {
				label string
				run   *Run
			}{{"runc", ref}, {"ours", ours}} {
				if m := x.run.msgs[r.key]; m != "" {
					fmt.Printf("    %s error: %s\n", x.label, m)
				}
			}
		}
	}
	return bad
}

func printSingle(scenario string, r *Run, verbose bool) {
	fmt.Printf("\n=== %s on %s only\n", scenario, r.label)
	for _, o := range r.obs {
		fmt.Printf("%-34s | %s\n", short(o.key, 34), strings.ReplaceAll(o.val, "\n", "⏎"))
		if m := r.msgs[o.key]; m != "" && verbose {
			fmt.Printf("    error: %s\n", m)
		}
	}
}
