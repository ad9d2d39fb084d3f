// Command testsummary reads `go test -json` on stdin and shows the progress
// of a long run the way a person wants to follow it: one line per package
// when it finishes (ok or FAIL, its time and its number of tests), the full
// output of every failed test and of a package that did not build, and,
// while packages run, a line every -every saying which are still running.
// A package that hits go test's -timeout is said to have "timed out", with
// the tests that were running then (their own output, not the goroutine
// dump) and the number that had not started yet; each running top-level
// test counts as failed. So is one that go test killed because it ran a
// minute past the -timeout without the testing package's own report (a
// starved machine), and a package whose events end without a result (go
// test itself killed): the tests it had started and not finished are
// named. It ends with "go test: N passed, N failed, N
// skipped (tests) in D" (and how many packages timed out) and, with -counts
// FILE, writes "PASSED FAILED" there for scripts/test.sh's final line. It
// exits 1 when a test or a package failed, 0 otherwise.
//
//	go test -json ./... | go run ./scripts/testsummary -counts FILE
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// summary accumulates the run; its methods are called with mu held.
type summary struct {
	mu                      sync.Mutex
	out                     io.Writer
	start                   time.Time
	running                 map[string]time.Time // package → first event
	output                  map[string][]string  // package or package/test → its output
	tests                   map[string]int       // package → top-level tests finished
	state                   map[string]string    // package/test → "run" or "pause", while unfinished
	passed, failed, skipped int
	failedPkgs, timedOut    []string
}

func newSummary(out io.Writer) *summary {
	return &summary{out: out, start: time.Now(), running: map[string]time.Time{}, output: map[string][]string{}, tests: map[string]int{}, state: map[string]string{}}
}

func (s *summary) event(e event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e.Package == "" {
		return
	}
	if _, ok := s.running[e.Package]; !ok && e.Action != "pass" && e.Action != "fail" && e.Action != "skip" {
		s.running[e.Package] = time.Now()
	}
	key := e.Package
	if e.Test != "" {
		key += "/" + e.Test
	}
	switch e.Action {
	case "output":
		s.output[key] = append(s.output[key], e.Output)
	case "run", "cont":
		if e.Test != "" {
			s.state[key] = "run"
		}
	case "pause":
		if e.Test != "" {
			s.state[key] = "pause"
		}
	case "pass", "fail", "skip":
		if e.Test != "" {
			delete(s.state, key)
			e.Action = s.ownTimeout(e, key)
			if e.Action == "fail" {
				fmt.Fprintf(s.out, "--- FAIL: %s (%s)\n%s", e.Test, e.Package, strings.Join(s.output[key], ""))
			}
			if !strings.Contains(e.Test, "/") { // top-level tests only
				s.tests[e.Package]++
				switch e.Action {
				case "pass":
					s.passed++
				case "fail":
					s.failed++
				default:
					s.skipped++
				}
			}
			delete(s.output, key)
			return
		}
		s.packageDone(e)
	}
}

// ownTimeout hands the package's timeout panic, when go test gave it to
// test e (the last test it had named: on a busy machine the panic can come
// between a test's "--- PASS" line and its pass event), back to the
// package, and returns the test's own result: pass when it said so before
// the panic.
func (s *summary) ownTimeout(e event, key string) string {
	out := s.output[key]
	i := slices.IndexFunc(out, func(l string) bool { return strings.HasPrefix(l, timeoutPanic) })
	if i < 0 {
		return e.Action
	}
	s.output[e.Package] = append(s.output[e.Package], out[i:]...)
	s.output[key] = out[:i]
	if slices.ContainsFunc(out[:i], func(l string) bool { return strings.HasPrefix(l, "--- PASS: "+e.Test+" (") }) {
		return "pass"
	}
	return e.Action
}

// packageDone prints a package's line; a failed package with no failed
// test (a build error, a panic outside a test, a timeout) shows its output
// and counts as one failure.
func (s *summary) packageDone(e event) {
	delete(s.running, e.Package)
	n := s.tests[e.Package]
	switch e.Action {
	case "pass":
		fmt.Fprintf(s.out, "ok    %-50s %6.1fs  %d tests\n", e.Package, e.Elapsed, n)
	case "skip":
		fmt.Fprintf(s.out, "ok    %-50s         no tests\n", e.Package)
	case "fail":
		if s.timeout(e, n) {
			break
		}
		fmt.Fprintf(s.out, "FAIL  %-50s %6.1fs  %d tests\n", e.Package, e.Elapsed, n)
		s.failedPkgs = append(s.failedPkgs, e.Package)
		own := false
		for k := range s.output {
			if strings.HasPrefix(k, e.Package+"/") {
				own = true // a test still running when the package failed: its output says why
				fmt.Fprintf(s.out, "--- unfinished: %s\n%s", strings.TrimPrefix(k, e.Package+"/"), strings.Join(s.output[k], ""))
				delete(s.output, k)
			}
		}
		if out := s.output[e.Package]; own || !slices.ContainsFunc(out, func(l string) bool { return strings.HasPrefix(l, "--- FAIL") }) {
			fmt.Fprint(s.out, strings.Join(out, ""))
			s.failed++
		}
	}
	s.forget(e.Package)
}

// forget drops what is kept of a finished package's tests.
func (s *summary) forget(pkg string) {
	delete(s.output, pkg)
	for k := range s.output {
		if strings.HasPrefix(k, pkg+"/") {
			delete(s.output, k)
		}
	}
	for k := range s.state {
		if strings.HasPrefix(k, pkg+"/") {
			delete(s.state, k)
		}
	}
}

// timeoutPanic starts the testing package's report of a -timeout.
const timeoutPanic = "panic: test timed out after "

// killedPrefix starts go test's own line when it kills a test binary that
// ran a minute past -timeout without ending ("*** Test killed with quit:
// ran too long (10m0s)."), after its SIGQUIT goroutine dump.
const killedPrefix = "*** Test killed"

// dumpStart starts the goroutine dump of a SIGQUIT.
const dumpStart = "SIGQUIT: quit"

// unfinished returns pkg's tests that started and have not ended: those
// running, and how many more were paused (waiting for a -parallel slot).
func (s *summary) unfinished(pkg string) (running []string, waiting int) {
	for k, st := range s.state {
		name, ok := strings.CutPrefix(k, pkg+"/")
		if !ok {
			continue
		}
		if st == "run" {
			running = append(running, name)
		} else {
			waiting++
		}
	}
	slices.Sort(running)
	return running, waiting
}

// cutDump drops a SIGQUIT goroutine dump and what follows from out.
func cutDump(out []string) []string {
	if i := slices.IndexFunc(out, func(l string) bool { return strings.HasPrefix(l, dumpStart) }); i >= 0 {
		return out[:i]
	}
	return out
}

// timeout reports package e (failed, n tests finished) as timed out if its
// output holds the testing package's timeout panic, and says so. The panic
// lists the tests running at that moment ("running tests:", then one
// "\t\tName (duration)" a line); their output up to the panic is shown,
// the goroutine dump is not (go test's own log has it).
func (s *summary) timeout(e event, n int) bool {
	var after string
	var running []string
	for k, out := range s.output {
		if k != e.Package && !strings.HasPrefix(k, e.Package+"/") {
			continue
		}
		for i, l := range out {
			if !strings.HasPrefix(l, timeoutPanic) {
				continue
			}
			after = strings.TrimSpace(strings.TrimPrefix(l, timeoutPanic))
			for _, l := range out[i+1:] {
				if strings.TrimSpace(l) == "running tests:" {
					continue
				}
				if !strings.HasPrefix(l, "\t\t") {
					break
				}
				if name, _, ok := strings.Cut(strings.TrimSpace(l), " ("); ok {
					running = append(running, name)
				}
			}
			s.output[k] = out[:i] // the test's own output; the dump is go test's
			break
		}
	}
	killed := ""
	if after == "" {
		// No report of the testing package's: did go test kill it?
		for k, out := range s.output {
			if k != e.Package && !strings.HasPrefix(k, e.Package+"/") {
				continue
			}
			for _, l := range out {
				if strings.HasPrefix(l, killedPrefix) {
					killed = strings.TrimSpace(l)
				}
			}
		}
		if killed == "" {
			return false
		}
		for k, out := range s.output {
			if k == e.Package || strings.HasPrefix(k, e.Package+"/") {
				s.output[k] = cutDump(out)
			}
		}
		running, _ = s.unfinished(e.Package)
	}
	s.failedPkgs = append(s.failedPkgs, e.Package)
	s.timedOut = append(s.timedOut, e.Package)
	if killed != "" {
		fmt.Fprintf(s.out, "FAIL  %-50s %6.1fs  %d tests  TIMED OUT: go test killed it (%s)\n", e.Package, e.Elapsed, n, killed)
	} else {
		fmt.Fprintf(s.out, "FAIL  %-50s %6.1fs  %d tests  TIMED OUT after %s (go test -timeout)\n", e.Package, e.Elapsed, n, after)
	}
	fmt.Fprintf(s.out, "      running when it timed out: %s\n", strings.Join(running, ", "))
	if len(running) == 0 {
		fmt.Fprint(s.out, "      (go test named none)\n")
	}
	waiting := 0
	for k, st := range s.state {
		if st == "pause" && strings.HasPrefix(k, e.Package+"/") && !slices.Contains(running, strings.TrimPrefix(k, e.Package+"/")) {
			waiting++
		}
	}
	if waiting > 0 {
		fmt.Fprintf(s.out, "      %d more tests had not started (waiting for a -parallel slot)\n", waiting)
	}
	for _, name := range running {
		if out := s.output[e.Package+"/"+name]; len(out) > 0 {
			fmt.Fprintf(s.out, "--- timed out: %s\n%s", name, strings.Join(out, ""))
		}
		if !strings.Contains(name, "/") {
			s.failed++
		}
	}
	if !slices.ContainsFunc(running, func(n string) bool { return !strings.Contains(n, "/") }) {
		s.failed++ // the package failed, whatever go test named
	}
	return true
}

// noResult reports the packages whose events ended without a result (go
// test itself was killed, or died), naming the tests they had started and
// not finished; each counts as failed, as does the package. Called with mu
// held, once the input has ended.
func (s *summary) noResult() {
	pkgs := slices.Sorted(maps.Keys(s.running))
	for _, p := range pkgs {
		running, waiting := s.unfinished(p)
		fmt.Fprintf(s.out, "FAIL  %-50s no result: go test ended before it did\n", p)
		if len(running) > 0 {
			fmt.Fprintf(s.out, "      still running then: %s\n", strings.Join(running, ", "))
		}
		if waiting > 0 {
			fmt.Fprintf(s.out, "      %d more tests had not started (waiting for a -parallel slot)\n", waiting)
		}
		for _, name := range running {
			if out := cutDump(s.output[p+"/"+name]); len(out) > 0 {
				fmt.Fprintf(s.out, "--- unfinished: %s\n%s", name, strings.Join(out, ""))
			}
			if !strings.Contains(name, "/") {
				s.failed++
			}
		}
		s.failedPkgs = append(s.failedPkgs, p)
		s.failed++
		s.forget(p)
		delete(s.running, p)
	}
}

// tick reports the packages still running.
func (s *summary) tick() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.running) == 0 {
		// Between packages, or before the first: go test is building.
		fmt.Fprintf(s.out, "      ... %s elapsed; no package running: go test is building (test binaries, with -race)\n", time.Since(s.start).Round(time.Second))
		return
	}
	var names []string
	for p := range s.running {
		names = append(names, strings.TrimPrefix(p, "github.com/leaderrun/leaderrun/"))
	}
	slices.Sort(names)
	fmt.Fprintf(s.out, "      ... %s elapsed; running: %s\n", time.Since(s.start).Round(time.Second), strings.Join(names, ", "))
}

func main() {
	counts := flag.String("counts", "", "write \"PASSED FAILED\" into this file at the end")
	every := flag.Duration("every", 30*time.Second, "how often to say which packages still run")
	flag.Parse()

	s := newSummary(os.Stdout)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // owned by main, which waits for it below
		defer wg.Done()
		t := time.NewTicker(*every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				s.tick()
			}
		}
	}()

	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Not an event: go vet's or the build's own text; pass it on.
			fmt.Println(sc.Text())
			continue
		}
		s.event(e)
	}
	close(done)
	wg.Wait()
	if err := sc.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testsummary:", err)
		s.failed++
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noResult()
	timedOut := ""
	if len(s.timedOut) > 0 {
		timedOut = fmt.Sprintf("; %d package(s) timed out: %s", len(s.timedOut), strings.Join(s.timedOut, " "))
	}
	fmt.Printf("go test: %d passed, %d failed, %d skipped (tests) in %s%s\n", s.passed, s.failed, s.skipped, time.Since(s.start).Round(time.Second), timedOut)
	if len(s.failedPkgs) > 0 {
		fmt.Printf("failed packages: %s\n", strings.Join(s.failedPkgs, " "))
	}
	if *counts != "" {
		if err := os.WriteFile(*counts, fmt.Appendf(nil, "%d %d\n", s.passed, s.failed), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "testsummary:", err)
			os.Exit(1)
		}
	}
	if s.failed > 0 {
		os.Exit(1)
	}
}
