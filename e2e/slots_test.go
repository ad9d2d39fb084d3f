package e2e

// --slots on the file store, Redis, PostgreSQL, etcd and Azure: four
// contenders for the three slots of one lease never run more than three
// children at once, never two in one slot, each slot's tokens increase and
// no token is given twice; a contender with another number of slots is
// refused with one line and exit 125 without starting its child; status
// lists the held slots.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestFileSlots(t *testing.T) {
	t.Parallel()
	testSlots(t, []string{"LEADERRUN_STORE=" + fileStore(t)}, "slotjob", "2s")
}

func TestRedisSlots(t *testing.T) { testSharedSlots(t, redisStore) }

func TestPostgresSlots(t *testing.T) { testSharedSlots(t, pgStore) }

func TestEtcdSlots(t *testing.T) { testSharedSlots(t, etcdStore) }

func TestAzureSlots(t *testing.T) {
	t.Parallel()
	_, store := azShared(t, "poll=200ms")
	testSlots(t, append(azEnv(azDevKey), "LEADERRUN_STORE="+store), e2eName(t, "slotjob"), "15s")
}

// testSharedSlots runs testSlots in parallel on the shared server of s,
// with a lease name of the test's own and a TTL of 2s.
func testSharedSlots(t *testing.T, s faultStore) {
	t.Parallel()
	_, env := s.shared(t)
	testSlots(t, env, e2eName(t, "slotjob"), "2s")
}

// slotsLog is what each child appends to the shared log, one line at its
// start and one at its end (O_APPEND: the file's order is the order of
// the writes).
const slotsLog = `echo "start $LEADERRUN_SLOT $LEADERRUN_LEASE_SLOTS $LEADERRUN_LEASE_TOKEN" >> "$0"; sleep 0.2; echo "end $LEADERRUN_SLOT $LEADERRUN_LEASE_SLOTS $LEADERRUN_LEASE_TOKEN" >> "$0"`

func testSlots(t *testing.T, env []string, name, ttl string) {
	const n, contenders, runs = 3, 4, 3
	log := filepath.Join(t.TempDir(), "log")
	run := func(slots int, extra ...string) (int, string) {
		args := append([]string{"--slots", strconv.Itoa(slots), "--name", name, "--ttl", ttl}, extra...)
		args = append(args, "--", "sh", "-c", slotsLog, log)
		cmd := exec.Command(lrBin, args...)
		cmd.Env = append(append(os.Environ(), "NO_COLOR=1", "TZ=UTC"), env...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), stderr.String()
		}
		if err != nil {
			t.Errorf("leaderrun: %v", err)
		}
		return 0, stderr.String()
	}
	var wg sync.WaitGroup
	for c := range contenders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range runs {
				if code, stderr := run(n, "--holder", fmt.Sprint("c", c)); code != 0 {
					t.Errorf("contender %d: exit %d: %s", c, code, stderr)
					return
				}
			}
		}()
	}
	wg.Wait()
	checkSlotsLog(t, log, n, contenders*runs)

	// Another number of slots than the holders': one line, exit 125, no child.
	hold := exec.Command(lrBin, "--slots", strconv.Itoa(n), "--name", name, "--ttl", ttl, "--", "sh", "-c", `echo held >> "$0"; sleep 30`, log+".hold")
	hold.Env = append(append(os.Environ(), "NO_COLOR=1"), env...)
	if err := hold.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = hold.Process.Kill(); _ = hold.Wait() }()
	waitForFile(t, log+".hold")
	before := countLines(t, log)
	code, stderr := run(2, "--no-wait")
	if code != 125 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "same number of slots") {
		t.Errorf("--slots 2 against holders of 3: exit %d, stderr %q; want one line and 125", code, stderr)
	}
	if got := countLines(t, log); got != before {
		t.Errorf("the refused contender's child ran")
	}
	st := exec.Command(lrBin, "status", name)
	st.Env = append(os.Environ(), env...)
	out, _ := st.Output()
	if !strings.Contains(string(out), "1 of 3 slots held") || !strings.Contains(string(out), "slot 0:") {
		t.Errorf("status with one slot held:\n%s", out)
	}
}

// checkSlotsLog replays the children's log: at most n running at once, no
// slot twice, every slot in 0..n-1, each slot's tokens increasing, no token
// twice, and want runs in all.
func checkSlotsLog(t *testing.T, log string, n, want int) {
	t.Helper()
	f, err := os.Open(log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	running := map[int]uint64{}
	last := map[int]uint64{}
	seen := map[uint64]bool{}
	most, runs := 0, 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var what string
		var slot, slots int
		var tok uint64
		if _, err := fmt.Sscanf(sc.Text(), "%s %d %d %d", &what, &slot, &slots, &tok); err != nil || slots != n || slot < 0 || slot >= n {
			t.Fatalf("log line %q: want a slot of %d (%v)", sc.Text(), n, err)
		}
		switch what {
		case "start":
			if tok2, ok := running[slot]; ok {
				t.Errorf("slot %d: token %d started while token %d runs", slot, tok, tok2)
			}
			if seen[tok] || tok <= last[slot] {
				t.Errorf("slot %d: token %d after %d (or given twice)", slot, tok, last[slot])
			}
			running[slot], last[slot], seen[tok] = tok, tok, true
			most = max(most, len(running))
			runs++
		case "end":
			delete(running, slot)
		}
	}
	if most > n || runs != want {
		t.Errorf("%d runs, at most %d at once; want %d runs, at most %d at once", runs, most, want, n)
	}
	t.Logf("%d runs, at most %d children at once", runs, most)
}

func countLines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// waitForFile waits until path exists (a child's first line): polled, as
// nothing else tells of a file another process makes.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	for range 600 {
		if _, err := os.Stat(path); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s never appeared", path)
}

func init() { readmeChecks["slots-nfs"] = readmeSlotsNFS }

// slots-nfs (docs/usage.md): three instances of the line start together;
// two back up at once, in slots 0 and 1, and the third waits for one of
// them and then runs.
func readmeSlotsNFS(t *testing.T, fx *readmeFixture, b *readmeBlock) {
	c := b.take(t, "leaderrun --slots 2 ")
	line := fx.subst(t, c.text)
	job := afterDashDash(t, strings.Fields(line))[0]
	fx.underRoot(t, job)
	log := filepath.Join(fx.work, "slotsnfs.log")
	writeScript(t, job, fmt.Sprintf(`echo "start $LEADERRUN_SLOT $LEADERRUN_LEASE_SLOTS $LEADERRUN_LEASE_TOKEN" >> %[1]s; sleep 0.3; echo "end $LEADERRUN_SLOT $LEADERRUN_LEASE_SLOTS $LEADERRUN_LEASE_TOKEN" >> %[1]s`+"\n", log))
	env := append(fx.cronEnv(), "PATH="+filepath.Dir(fx.installed(t))+":/usr/bin:/bin")
	runLineTogether(t, fx, b, c, line, [][]string{env, env, env})
	checkSlotsLog(t, log, 2, 3)
}

// runLineTogether runs line, the command c of the README block b after
// fx.subst, with sh in the fixture's root, once with each of envs, all at
// once; a run that fails fails t, naming c's line.
func runLineTogether(t *testing.T, fx *readmeFixture, b *readmeBlock, c readmeCmd, line string, envs [][]string) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(envs))
	for i, env := range envs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command("/bin/sh", "-c", line)
			cmd.Env, cmd.Dir = env, fx.root
			if out, err := cmd.CombinedOutput(); err != nil {
				errs[i] = fmt.Errorf("%v: %s", err, out)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("%s:%d: %v", b.file, c.line, err)
		}
	}
}

// --hold-at-least, --health-cmd and --priority with slots (file store):
// a finished run's slot stays taken for its hold; a failing health check
// steps down and frees the slot; of two standbys for a full lease, the one
// of higher priority takes the first slot freed.
func TestFileSlotsWithFeatures(t *testing.T) {
	t.Parallel()
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	for range 2 {
		if code, stderr := runLR(t, env, "--slots", "2", "--name", "held", "--hold-at-least", "1m", "--", "true"); code != 0 {
			t.Fatalf("a run with --hold-at-least: exit %d: %s", code, stderr)
		}
	}
	if code, stderr := runLR(t, env, "--slots", "2", "--name", "held", "-n", "--", "true"); code != 75 || !strings.Contains(stderr, "all 2 slots of lease held are held") {
		t.Fatalf("with both slots kept by their holds: exit %d: %s; want 75", code, stderr)
	}

	if code, stderr := runLR(t, env, "--slots", "2", "--name", "health", "--health-cmd", "false", "--health-interval", "100ms", "--health-retries", "1", "--", "sleep", "30"); code != 123 {
		t.Fatalf("a failing health check: exit %d: %s; want 123", code, stderr)
	}
	if code, stderr := runLR(t, env, "--slots", "2", "--name", "health", "-n", "--", "true"); code != 0 {
		t.Fatalf("after the step-down: exit %d: %s; want the slot free", code, stderr)
	}

	marks := filepath.Join(t.TempDir(), "marks")
	var holders []func()
	for i := range 2 {
		p, in := startStdin(t, env, "--slots", "2", "--name", "prio", "--holder", fmt.Sprint("h", i), "--", "sh", "-c", "echo ready; read x || true")
		if l := p.line(); l != "ready" {
			t.Fatalf("holder %d said %q", i, l)
		}
		holders = append(holders, func() {
			_ = in.Close()
			if c := p.wait(); c != 0 {
				t.Errorf("holder %d: exit %d: %s", i, c, p.stderr.String())
			}
		})
	}
	w, _ := startWatch(t, env, "prio")
	var sbs []*lr
	for _, p := range []int{0, 5} { // the better one joins last
		label := fmt.Sprint("p", p)
		sbs = append(sbs, start(t, env, "--slots", "2", "--name", "prio", "--holder", label, "--priority", strconv.Itoa(p),
			"--", "sh", "-c", `echo "$0 $(date +%s%N)" >> "$1"`, label, marks))
		awaitEvent(t, w, "standby_joined "+label, false)
	}
	holders[0]()
	if c := sbs[1].wait(); c != 0 {
		t.Fatalf("standby p5: exit %d: %s", c, sbs[1].stderr.String())
	}
	holders[1]()
	if c := sbs[0].wait(); c != 0 {
		t.Fatalf("standby p0: exit %d: %s", c, sbs[0].stderr.String())
	}
	if labels, _ := runs(t, marks); fmt.Sprint(labels) != "[p5 p0]" {
		t.Fatalf("standbys ran in order %v; want [p5 p0]", labels)
	}
}

// slotEvent is a line of watch --json about one slot of a lease.
type slotEvent struct {
	Event  string `json:"event"`
	Slot   int    `json:"slot"`
	Slots  int    `json:"slots"`
	Held   bool   `json:"held"`
	Holder string `json:"holder"`
	Token  uint64 `json:"token"`
}

// status, watch and history with slots (file store): status lists every
// held slot with its holder, token and since, and the standbys (text and
// --json); watch prints a line for each slot that changes; the history
// names each run's slot.
func TestFileSlotsStatusWatchHistory(t *testing.T) {
	t.Parallel()
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	w := start(t, env, "watch", "--json", "--interval", "200ms", "obs")
	// awaitSlot reads watch's lines until slot k of 2 is held by holder
	// (free: "") with token tok.
	awaitSlot := func(k int, holder string, tok uint64) {
		t.Helper()
		for {
			l := w.line()
			var e slotEvent
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("watch printed %q: %v", l, err)
			}
			if e.Event == "slot" && e.Slot == k && e.Slots == 2 && e.Held == (holder != "") && strings.HasPrefix(e.Holder, holder) && e.Token == tok {
				return
			}
		}
	}
	tokens := make([]uint64, 2)
	stops := make([]func(), 2)
	for i := range 2 {
		p, in := startStdin(t, env, "--slots", "2", "--name", "obs", "--holder", fmt.Sprint("h", i), "--", "sh", "-c", `echo "$LEADERRUN_SLOT $LEADERRUN_LEASE_TOKEN"; read x || true`)
		var slot int
		if _, err := fmt.Sscanf(p.line(), "%d %d", &slot, &tokens[i]); err != nil || slot != i {
			t.Fatalf("holder h%d's child: slot %d, %v; want slot %d", i, slot, err, i)
		}
		awaitSlot(i, fmt.Sprint("h", i), tokens[i])
		stops[i] = func() {
			_ = in.Close()
			if c := p.wait(); c != 0 {
				t.Errorf("h%d: exit %d: %s", i, c, p.stderr.String())
			}
		}
	}
	sb, sbIn := startStdin(t, env, "--slots", "2", "--name", "obs", "--holder", "sb", "--", "sh", "-c", `echo "$LEADERRUN_SLOT $LEADERRUN_LEASE_TOKEN"; read x || true`)
	var st struct {
		Slots   int `json:"slots"`
		Holders []struct {
			Slot   int        `json:"slot"`
			Holder string     `json:"holder"`
			Token  uint64     `json:"token"`
			Since  *time.Time `json:"since"`
		} `json:"holders"`
		Standbys []struct {
			Holder string `json:"holder"`
		} `json:"standbys"`
	}
	// The standby registers once it found both slots held: the watch
	// reports it, and status then lists it.
	for {
		l := w.line()
		var e slotEvent
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("watch printed %q: %v", l, err)
		}
		if e.Event == "standby_joined" && e.Holder == "sb" {
			break
		}
	}
	code, out, stderr := leaderOut(t, env, "status", "--json", "obs")
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("status --json: exit %d, %v: %s %s", code, err, out, stderr)
	}
	if st.Slots != 2 || len(st.Holders) != 2 || len(st.Standbys) != 1 || st.Standbys[0].Holder != "sb" {
		t.Fatalf("status --json %+v; want 2 slots, 2 holders and the standby sb", st)
	}
	for i, h := range st.Holders {
		if h.Slot != i || !strings.HasPrefix(h.Holder, fmt.Sprint("h", i)) || h.Token != tokens[i] || h.Since == nil {
			t.Fatalf("status --json holder %d: %+v; want slot %d, h%d, token %d, a since", i, h, i, i, tokens[i])
		}
	}
	_, out, _ = leaderOut(t, env, "status", "obs")
	for _, want := range []string{"obs: 2 of 2 slots held", "slot 0: held by h0 since ", fmt.Sprintf(", token %d", tokens[0]), "slot 1: held by h1 since ", fmt.Sprintf(", token %d", tokens[1]), "sb"} {
		if !strings.Contains(out, want) {
			t.Fatalf("status:\n%s\nwant %q", out, want)
		}
	}

	// h0 ends: the standby takes slot 0, with a token above both.
	stops[0]()
	var slot int
	var tok uint64
	if _, err := fmt.Sscanf(sb.line(), "%d %d", &slot, &tok); err != nil || slot != 0 || tok <= tokens[1] {
		t.Fatalf("standby's child: slot %d token %d, %v; want slot 0 with a token above %d", slot, tok, err, tokens[1])
	}
	awaitSlot(0, "sb", tok)
	_ = sbIn.Close()
	if c := sb.wait(); c != 0 {
		t.Fatalf("sb: exit %d: %s", c, sb.stderr.String())
	}
	awaitSlot(0, "", 0)
	stops[1]()
	awaitSlot(1, "", 0)

	runs := history(t, env, "obs", "--limit", "0")
	var got []string
	for _, r := range runs {
		slot := -1
		if r.Slot != nil {
			slot = *r.Slot
		}
		got = append(got, fmt.Sprintf("%s slot %d of %d, %d", r.Holder, slot, r.Slots, r.Token))
	}
	want := []string{fmt.Sprintf("h0 slot 0 of 2, %d", tokens[0]), fmt.Sprintf("h1 slot 1 of 2, %d", tokens[1]), fmt.Sprintf("sb slot 0 of 2, %d", tok)}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("history %q; want %q", got, want)
	}
}

// With 4 slots, once slots 0 and 1 ended while 2 and 3 still run, status
// says 2 of 4 held (exit 0, --json "held":true), history counts both live
// runs as running (leaderrun_history_running 2), and a watch that polls
// only once an hour reports slots 0 and 1 free and, when 2 and 3 end, each
// of them free, from the store's events, never a held slot as free.
// (status said free, exit 3, as SlotStatus stopped after two free slots in
// a row; history counted slot 0's run only; watch missed slots' changes.)
func TestFileSlotsHighSlotsStillHeld(t *testing.T) {
	t.Parallel()
	env := []string{"LEADERRUN_STORE=" + fileStore(t)}
	const n = 4
	stops := make([]func(), n)
	tokens := make([]uint64, n)
	for i := range n {
		p, in := startStdin(t, env, "--slots", strconv.Itoa(n), "--name", "hi", "--holder", fmt.Sprint("h", i), "--", "sh", "-c", `echo "$LEADERRUN_SLOT $LEADERRUN_LEASE_TOKEN"; read x || true`)
		var slot int
		if _, err := fmt.Sscanf(p.line(), "%d %d", &slot, &tokens[i]); err != nil || slot != i {
			t.Fatalf("holder h%d's child: slot %d, %v; want slot %d", i, slot, err, i)
		}
		stops[i] = func() {
			_ = in.Close()
			if c := p.wait(); c != 0 {
				t.Errorf("h%d: exit %d: %s", i, c, p.stderr.String())
			}
		}
	}
	w := start(t, env, "watch", "--json", "--interval", "1h", "hi")
	held := map[int]bool{}
	for range n {
		var e slotEvent
		if l := w.line(); json.Unmarshal([]byte(l), &e) != nil || e.Event != "slot" || e.Slots != n {
			t.Fatalf("watch's first lines: %q; want one per slot of %d", l, n)
		}
		held[e.Slot] = e.Held
	}
	if len(held) != n || !held[0] || !held[3] {
		t.Fatalf("watch's first view: %v; want every slot held", held)
	}
	// awaitFree reads watch's lines until slot k is reported free; no
	// line may report a slot still running free.
	awaitFree := func(k int, running ...int) {
		t.Helper()
		for {
			l := w.line()
			var e slotEvent
			if err := json.Unmarshal([]byte(l), &e); err != nil {
				t.Fatalf("watch printed %q: %v", l, err)
			}
			if e.Event == "slot" && !e.Held && slices.Contains(running, e.Slot) {
				t.Fatalf("watch reports slot %d free while it runs: %s", e.Slot, l)
			}
			if e.Event == "slot" && e.Slot == k && !e.Held {
				return
			}
		}
	}
	stops[0]()
	awaitFree(0, 1, 2, 3)
	stops[1]()
	awaitFree(1, 2, 3)

	code, out, stderr := leaderOut(t, env, "status", "hi")
	if code != 0 || !strings.Contains(out, "hi: 2 of 4 slots held") || !strings.Contains(out, "slot 2: held by h2") || !strings.Contains(out, "slot 3: held by h3") {
		t.Fatalf("status with slots 2 and 3 held: exit %d\n%s%s", code, out, stderr)
	}
	var st struct {
		Held    bool `json:"held"`
		Slots   int  `json:"slots"`
		Holders []struct {
			Slot int `json:"slot"`
		} `json:"holders"`
	}
	code, out, _ = leaderOut(t, env, "status", "--json", "hi")
	if err := json.Unmarshal([]byte(out), &st); err != nil || code != 0 || !st.Held || st.Slots != n || len(st.Holders) != 2 || st.Holders[0].Slot != 2 {
		t.Fatalf("status --json: exit %d, %+v, %v: %s", code, st, err, out)
	}
	running := map[uint64]bool{}
	for _, r := range history(t, env, "hi", "--limit", "0") {
		running[r.Token] = r.Running
	}
	if running[tokens[0]] || running[tokens[1]] || !running[tokens[2]] || !running[tokens[3]] {
		t.Fatalf("history's running runs: %v; want those of tokens %d and %d", running, tokens[2], tokens[3])
	}
	if _, prom, _ := leaderOut(t, env, "history", "--format", "prom", "hi"); sample(prom, `leaderrun_history_running{name="hi"}`) != "2" {
		t.Fatalf("history --format prom:\n%s\nwant leaderrun_history_running 2", prom)
	}
	stops[3]()
	awaitFree(3, 2)
	stops[2]()
	awaitFree(2)
	if code, out, _ := leaderOut(t, env, "status", "hi"); code != 3 {
		t.Fatalf("status with every slot free: exit %d\n%s; want 3", code, out)
	}
}

func init() { readmeChecks["slots-nested"] = readmeSlotsNested }

// slots-nested (docs/usage.md): three hosts (each a file store of its own,
// which LEADERRUN_STORE names here for the default) start the line three
// times each, at once: every job runs, never more than 2 at once on a host
// nor 5 in the fleet.
func readmeSlotsNested(t *testing.T, fx *readmeFixture, b *readmeBlock) {
	c := b.take(t, "leaderrun --slots 2 ")
	line := fx.subst(t, c.text)
	job := afterDashDash(t, afterDashDash(t, strings.Fields(line)))[0]
	fx.underRoot(t, job)
	log := filepath.Join(fx.work, "slotsnested.log")
	writeScript(t, job, fmt.Sprintf(`echo "start $HOST_ID" >> %[1]s; sleep 0.5; echo "end $HOST_ID" >> %[1]s`+"\n", log))
	const hosts, each = 3, 3
	envs := make([][]string, hosts*each)
	for i := range envs {
		host := fmt.Sprint("host", i%hosts)
		envs[i] = append(fx.cronEnv(), "HOST_ID="+host, "LEADERRUN_STORE=file://"+filepath.Join(fx.work, host), "PATH="+filepath.Dir(fx.installed(t))+":/usr/bin:/bin")
	}
	runLineTogether(t, fx, b, c, line, envs)
	b2, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	running, most, runs := map[string]int{}, map[string]int{}, 0
	for _, l := range strings.Split(strings.TrimSpace(string(b2)), "\n") {
		what, host, _ := strings.Cut(l, " ")
		if what == "start" {
			running[host]++
			running[""]++
			runs++
		} else {
			running[host]--
			running[""]--
		}
		most[host] = max(most[host], running[host])
		most[""] = max(most[""], running[""])
	}
	for h, n := range most {
		limit := 2
		if h == "" {
			limit = 5
		}
		if n > limit {
			t.Errorf("%d jobs at once on %q (\"\": the fleet); at most %d", n, h, limit)
		}
	}
	if runs != hosts*each {
		t.Errorf("%d jobs ran; want %d", runs, hosts*each)
	}
	t.Logf("%d jobs, at most %d at once in the fleet: %v", runs, most[""], most)
}
