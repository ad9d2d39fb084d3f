// Command startcost measures what a run of a short command costs, for
// scripts/bench.sh: it runs the given commands round-robin, so a
// change in machine load touches them all alike, and prints for each the
// median and p90 wall time, and the median CPU time (user+system, children
// included) and minor page faults from wait4's rusage. (Peak RSS is not
// among them: a forked child starts with this program's pages; bench.sh
// reads it with /usr/bin/time.) Lines of
// the form "A - B" or "A / B" after the commands print differences and
// ratios of medians. With -markdown FILE, each "A / B" line is also a row
// of a Markdown table in FILE (docs/performance.md's start-up table).
// Commands are split on spaces; name a script for anything more.
//
//	startcost -n 200 true='true' lr='leaderrun -- true' -- 'lr - true'
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"time"
)

type sample struct {
	wall, cpu time.Duration
	faults    int64
}

type bench struct {
	name    string
	argv    []string
	samples []sample
}

func main() {
	n := flag.Int("n", 200, "runs of each command")
	warm := flag.Int("warmup", 20, "unmeasured runs of each command first")
	md := flag.String("markdown", "", "also write the ratios (A / B) as a Markdown table to this file")
	flag.Parse()
	var benches []*bench
	var exprs []string
	args := flag.Args()
	for i, a := range args {
		if a == "--" {
			exprs = args[i+1:]
			break
		}
		name, cmdline, ok := strings.Cut(a, "=")
		if !ok {
			fail("want NAME=COMMAND, got %q", a)
		}
		benches = append(benches, &bench{name: name, argv: strings.Fields(cmdline)})
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		fail("%v", err)
	}
	for i := 0; i < *warm+*n; i++ {
		for _, b := range benches {
			s := run(b, devnull)
			if i >= *warm {
				b.samples = append(b.samples, s)
			}
		}
	}
	med := map[string]sample{}
	fmt.Printf("   %-22s %9s %9s %9s %8s\n", "command", "median", "p90", "cpu", "faults")
	for _, b := range benches {
		m := summarize(b.samples)
		med[b.name] = m
		fmt.Printf("   %-22s %7.3fms %7.3fms %7.3fms %8d\n", b.name, ms(m.wall), ms(pct(b.samples, 0.9)), ms(m.cpu), m.faults)
	}
	var table strings.Builder
	fmt.Fprintf(&table, "| command | its reference | wall (median) | CPU (median) | minor faults |\n|---|---|---:|---:|---:|\n")
	for _, e := range exprs {
		f := strings.Fields(e)
		if len(f) != 3 {
			fail("want 'A - B' or 'A / B', got %q", e)
		}
		a, okA := med[f[0]]
		b, okB := med[f[2]]
		if !okA || !okB {
			fail("%q names an unknown command", e)
		}
		switch f[1] {
		case "-":
			fmt.Printf("   %-32s %+7.3f ms wall  %+7.3f ms cpu  %+6d faults\n", e, ms(a.wall-b.wall), ms(a.cpu-b.cpu), a.faults-b.faults)
		case "/":
			fmt.Printf("   %-32s %7.2fx wall  %7.2fx cpu  %7.2fx faults\n", e, float64(a.wall)/float64(b.wall), float64(a.cpu)/float64(b.cpu), float64(a.faults)/float64(b.faults))
			fmt.Fprintf(&table, "| %s | %s | %.2fx (%.2f ms) | %.2fx (%.2f ms) | %.2fx (%d) |\n", f[0], f[2],
				float64(a.wall)/float64(b.wall), ms(a.wall), float64(a.cpu)/float64(b.cpu), ms(a.cpu), float64(a.faults)/float64(b.faults), a.faults)
		default:
			fail("want - or / in %q", e)
		}
	}
	if *md != "" {
		if err := os.WriteFile(*md, []byte(table.String()), 0o644); err != nil {
			fail("%v", err)
		}
	}
}

func run(b *bench, devnull *os.File) sample {
	c := exec.Command(b.argv[0], b.argv[1:]...)
	c.Stdin, c.Stdout, c.Stderr = devnull, devnull, devnull
	start := time.Now()
	if err := c.Start(); err != nil {
		fail("%s: %v", b.name, err)
	}
	_ = c.Wait()
	wall := time.Since(start)
	if !c.ProcessState.Success() {
		fail("%s: %v", b.name, c.ProcessState)
	}
	ru := c.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return sample{wall: wall, cpu: cpu, faults: ru.Minflt}
}

// summarize is the per-field median.
func summarize(s []sample) sample {
	field := func(get func(sample) int64) int64 {
		v := make([]int64, len(s))
		for i, x := range s {
			v[i] = get(x)
		}
		slices.Sort(v)
		return v[len(v)/2]
	}
	return sample{
		wall:   time.Duration(field(func(x sample) int64 { return int64(x.wall) })),
		cpu:    time.Duration(field(func(x sample) int64 { return int64(x.cpu) })),
		faults: field(func(x sample) int64 { return x.faults }),
	}
}

func pct(s []sample, p float64) time.Duration {
	v := make([]time.Duration, len(s))
	for i, x := range s {
		v[i] = x.wall
	}
	slices.Sort(v)
	return v[int(float64(len(v)-1)*p)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "startcost: "+format+"\n", args...)
	os.Exit(2)
}
