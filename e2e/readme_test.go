package e2e

// TestReadmeExamples runs every code block of README.md and docs/*.md, so
// the examples cannot rot. Each block is either output (fence info `text`, `console` or
// `json`, or a `<!-- readme-test: not-run: REASON -->` line before it) or is
// preceded by `<!-- readme-test: ID -->`, where ID names a check in
// readmeChecks below (or is `exit N`, see readmeExitRE).
// A block without either fails the test, so a new example is covered by
// default. A check runs the block's own text, with only these substitutions:
//
//   - placeholder hosts (redis.internal) become this test's own redis-server
//     on 127.0.0.1; any other host left in a command fails the test, so no
//     example sends traffic off this machine;
//   - absolute paths under /usr/local, /opt, /var, /etc and /srv move under a
//     temporary root, `sudo` is dropped, and the default file store (no
//     --store) is a temporary directory;
//   - placeholder programs (./backup.sh, /opt/report/run, ...) are small
//     scripts the check writes, which print their arguments and fencing token.
//
// Every command of a block must be taken by its check, so a line added to an
// example without a check fails too.

import (
	"context"
	"debug/elf"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// readmeChecks maps a block's readme-test ID to the check that runs it.
var readmeChecks = map[string]func(*testing.T, *readmeFixture, *readmeBlock){
	"quickstart": readmeQuickstart,
	"install":    readmeInstall,
	"usage":      readmeUsage,
	"cron":       readmeCron,
	"systemd":    readmeSystemd,
	"ci":         readmeCI,
	"demo":       readmeDemo,
	"script":     readmeScript,
	"history":    readmeHistory,
	"prom-rules": readmePromRules, // e2e/monitor_test.go
	// docs/listen.md's alert rule
	"listen-prom-rules": readmePromRules,
}

// readmeExitRE is the marker of a shell block that needs no check of its
// own: `<!-- readme-test: exit N -->` runs each of its commands in turn, as
// the other checks do, and expects each to exit N.
var readmeExitRE = regexp.MustCompile(`^exit (\d+)$`)

// readmeOutputInfos are fence info strings of blocks that show output or
// data rather than something to run.
var readmeOutputInfos = []string{"text", "console", "json"}

func TestReadmeExamples(t *testing.T) {
	t.Parallel()
	var blocks []*readmeBlock
	for _, f := range docFiles(t) {
		blocks = append(blocks, readmeParse(t, f)...)
	}
	fx := newReadmeFixture(t)
	seen := map[string]int{}
	for _, b := range blocks {
		switch {
		case slices.Contains(readmeOutputInfos, b.info):
			if b.marker != "" {
				t.Errorf("%s:%d: a ```%s block is output; drop its marker %q", b.file, b.line, b.info, b.marker)
			}
			continue
		case strings.HasPrefix(b.marker, "not-run:"):
			if strings.TrimSpace(strings.TrimPrefix(b.marker, "not-run:")) == "" {
				t.Errorf("%s:%d: readme-test: not-run needs a reason", b.file, b.line)
			}
			continue
		case b.marker == "":
			t.Errorf("%s:%d: a ```%s block with no <!-- readme-test: ID --> line before it: add a check to e2e/readme_test.go, or fence it as ```text if it is output", b.file, b.line, b.info)
			continue
		}
		name, check := b.marker, readmeChecks[b.marker]
		if m := readmeExitRE.FindStringSubmatch(b.marker); m != nil && (b.info == "sh" || b.info == "bash") {
			want, _ := strconv.Atoi(m[1])
			name, check = fmt.Sprintf("%s_line%d_exit%d", strings.TrimSuffix(filepath.Base(b.file), ".md"), b.line, want), readmeExit(want)
		} else if check == nil {
			t.Errorf("%s:%d: readme-test %q: no such check in e2e/readme_test.go", b.file, b.line, b.marker)
			continue
		} else if seen[b.marker]++; seen[b.marker] > 1 {
			t.Errorf("%s:%d: readme-test %q used twice", b.file, b.line, b.marker)
			continue
		}
		t.Run(name, func(t *testing.T) {
			check(t, fx, b)
			if !t.Failed() {
				b.allTaken(t)
			}
		})
	}
	for id := range readmeChecks {
		if seen[id] == 0 {
			t.Errorf("check %q has no block in README.md or docs/ (remove it, or mark the block)", id)
		}
	}
}

// readmeBlock is one fenced code block of the README or of docs/.
type readmeBlock struct {
	file   string // the document: README.md, docs/stores.md, ...
	line   int    // 1-based line of the opening fence
	info   string // the fence's info string: "sh", "ini", ...
	marker string // the readme-test ID before it, "" if none
	body   []string
	end    int          // 1-based line of the closing fence
	output *readmeBlock // the ```text block right after it (one blank line between), if any
	cmds   []readmeCmd  // what its check must take, see take
	next   int
}

// readmeCmd is one command of a block, with its README line.
type readmeCmd struct {
	line int
	text string
}

var readmeMarkerRE = regexp.MustCompile(`^<!--\s*readme-test:\s*(.*?)\s*-->$`)

// readmeParse returns README's fenced blocks with their markers; commands
// are the non-comment lines of sh, bash and cron blocks (with trailing
// comments removed and backslash continuations joined).
func readmeParse(t *testing.T, path string) []*readmeBlock {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []*readmeBlock
	var cur *readmeBlock
	marker := ""
	for i, l := range strings.Split(string(b), "\n") {
		if cur != nil {
			if strings.TrimSpace(l) == "```" {
				cur.end = i + 1
				blocks = append(blocks, cur)
				cur = nil
				continue
			}
			cur.body = append(cur.body, l)
			continue
		}
		if info, ok := strings.CutPrefix(strings.TrimSpace(l), "```"); ok {
			cur = &readmeBlock{file: path, line: i + 1, info: strings.TrimSpace(info), marker: marker}
			marker = ""
			continue
		}
		if m := readmeMarkerRE.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
			marker = m[1]
		} else if strings.TrimSpace(l) != "" {
			marker = "" // a marker belongs to the block right after it
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: unclosed code block", path, cur.line)
	}
	for i := 1; i < len(blocks); i++ {
		if prev, bl := blocks[i-1], blocks[i]; bl.info == "text" && bl.line == prev.end+2 {
			prev.output = bl
		}
	}
	for _, bl := range blocks {
		if bl.info != "sh" && bl.info != "bash" && bl.info != "cron" {
			continue
		}
		joined := ""
		for j, l := range bl.body {
			s := strings.TrimSpace(l)
			if joined == "" && (s == "" || strings.HasPrefix(s, "#")) {
				continue
			}
			if c, ok := strings.CutSuffix(s, `\`); ok {
				joined += c + " "
				continue
			}
			bl.cmds = append(bl.cmds, readmeCmd{bl.line + 1 + j, shStripComment(joined + s)})
			joined = ""
		}
	}
	return blocks
}

// shStripComment removes a trailing shell comment (a # that starts a word
// outside quotes) and surrounding blanks.
func shStripComment(s string) string {
	var quote rune
	for i, r := range s {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || s[i-1] == ' ' || s[i-1] == '\t'):
			return strings.TrimSpace(s[:i])
		}
	}
	return strings.TrimSpace(s)
}

// take returns the block's next command, which must start with prefix.
func (b *readmeBlock) take(t *testing.T, prefix string) readmeCmd {
	t.Helper()
	if b.next >= len(b.cmds) {
		t.Fatalf("%s:%d: the block has no more commands; the check expected one starting %q", b.file, b.line, prefix)
	}
	c := b.cmds[b.next]
	b.next++
	if !strings.HasPrefix(c.text, prefix) {
		t.Fatalf("%s:%d: %q does not start with %q, which the check runs here", b.file, c.line, c.text, prefix)
	}
	return c
}

// allTaken fails the test when the check left commands of its block unrun.
func (b *readmeBlock) allTaken(t *testing.T) {
	t.Helper()
	for _, c := range b.cmds[b.next:] {
		t.Errorf("%s:%d: %q is not run by check %q; extend it in e2e/readme_test.go", b.file, c.line, c.text, b.marker)
	}
}

// readmeFixture is what every check shares: a temporary root for absolute
// paths, a working directory for relative ones, and a redis-server.
type readmeFixture struct {
	root  string // stands for / in /usr/local, /opt, /var, /etc, /srv
	work  string // the working directory of shell examples (./backup.sh)
	redis string // 127.0.0.1:PORT of this test's own redis-server
	clone string // a copy of the source tree, made by cloneDir
	bin   string // the leaderrun the demo runs: the test's build, or an installed one
}

func newReadmeFixture(t *testing.T) *readmeFixture {
	fx := &readmeFixture{root: t.TempDir(), work: t.TempDir(), bin: lrBin}
	if os.Getenv("LEADERRUN_TEST_REDIS") != "" {
		// A redis-server of its own, so the README's fixed lease names meet
		// no other test's keys, nor a previous run's. Without one, subst
		// skips (or, under CI, fails) only the checks that need Redis.
		env := leasetest.StartServer(t, t.TempDir(), "scripts/redis.sh", "single")
		if fx.redis = env["LEADERRUN_TEST_REDIS"]; fx.redis == "" {
			t.Fatalf("scripts/redis.sh wrote no address: %v", env)
		}
	}
	for _, d := range []string{"usr/local/bin", "opt", "var/lock", "etc", "srv", "home", "state"} {
		if err := os.MkdirAll(filepath.Join(fx.root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return fx
}

var (
	// readmeRootRE finds absolute paths the fixture moves under its root.
	readmeRootRE = regexp.MustCompile(`(^|[\s='"]|file://)/(usr/local|opt|var|etc|srv)/`)
	readmeSudoRE = regexp.MustCompile(`(^|[\s;&|(])sudo\s+`)
	// readmeURLRE finds URLs, to check that every host left is local.
	readmeURLRE = regexp.MustCompile(`\b[a-z][a-z0-9+.-]*://([^\s/'"?#]*)`)
)

// subst applies the fixture's substitutions to a command or configuration
// value and fails the test if it would still reach a host other than
// 127.0.0.1.
func (fx *readmeFixture) subst(t *testing.T, s string) string {
	t.Helper()
	if strings.Contains(s, "redis.internal") && fx.redis == "" {
		requireEnv(t, "LEADERRUN_TEST_REDIS")
	}
	s = strings.NewReplacer("redis.internal:6379", fx.redis, "redis.internal", fx.redis).Replace(s)
	s = readmeSudoRE.ReplaceAllString(s, "$1")
	s = readmeRootRE.ReplaceAllString(s, "${1}"+fx.root+"/${2}/")
	for _, m := range readmeURLRE.FindAllStringSubmatch(s, -1) {
		host := m[1]
		if i := strings.LastIndexByte(host, '@'); i >= 0 {
			host = host[i+1:]
		}
		if h, _, ok := strings.Cut(host, ":"); ok && !strings.HasPrefix(host, "[") {
			host = h
		}
		if host != "" && host != "127.0.0.1" && host != "[::1]" && !strings.HasPrefix(host, "[::1]:") {
			t.Fatalf("%q would reach %s: e2e/readme_test.go must map that placeholder to a test server", s, host)
		}
	}
	return s
}

// underRoot fails the test unless path lies in the fixture's root, so a
// check never writes a stand-in program into the real file system.
func (fx *readmeFixture) underRoot(t *testing.T, path string) {
	t.Helper()
	if !strings.HasPrefix(path, fx.root+"/") {
		t.Fatalf("%s is not under the test's root %s", path, fx.root)
	}
}

// goBin is the go command that built the test binary.
func goBin() string { return filepath.Join(runtime.GOROOT(), "bin", "go") }

// shellEnv is the environment of a shell example: this test's environment
// without leaderrun's or the stores' variables, leaderrun on PATH (as after
// an install), and the default file store moved into the fixture.
func (fx *readmeFixture) shellEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "LEADERRUN_") || strings.HasPrefix(k, "AZURE_") || k == "REDISCLI_AUTH" || k == "PATH" {
			continue
		}
		env = append(env, kv)
	}
	return append(env,
		"PATH="+filepath.Dir(lrBin)+":"+filepath.Dir(goBin())+":/usr/bin:/bin",
		"LEADERRUN_STORE=file://"+filepath.Join(fx.root, "state"),
		"NO_COLOR=1")
}

// cronEnv is the environment cron gives a job.
func (fx *readmeFixture) cronEnv() []string {
	return []string{"HOME=" + filepath.Join(fx.root, "home"), "LOGNAME=leaderrun", "SHELL=/bin/sh", "PATH=/usr/bin:/bin"}
}

// installed returns the leaderrun that the install example put under the
// root's /usr/local/bin, copying the test's build of every program there
// when that check did not run (go test -run TestReadmeExamples/cron).
func (fx *readmeFixture) installed(t *testing.T) string {
	t.Helper()
	dst := filepath.Join(fx.root, "usr/local/bin/leaderrun")
	if _, err := os.Stat(dst); err == nil {
		return dst
	}
	// Every program, as the install puts them side by side.
	for _, prog := range storePrograms {
		b, err := os.ReadFile(filepath.Join(filepath.Dir(lrBin), prog))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(filepath.Dir(dst), prog), b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

// cloneDir returns a copy of the source tree as a fresh clone has it:
// without .git, .tools and build output.
func (fx *readmeFixture) cloneDir(t *testing.T) string {
	t.Helper()
	if fx.clone != "" {
		return fx.clone
	}
	src, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(fx.root, "srv/clone")
	err = filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		switch {
		case d.IsDir() && slices.Contains([]string{".git", ".tools", "node_modules", "bench-out", "dist", "bin"}, rel):
			return filepath.SkipDir
		case rel == "leaderrun" || strings.HasSuffix(rel, ".test") || rel == ".git":
			return nil
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case !d.Type().IsRegular():
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
	fx.clone = dst
	return dst
}

// writeScript writes an executable /bin/sh script.
func writeScript(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// readmeToken is how a stand-in program prints its fencing token, under the
// child's variable of either name.
const readmeToken = `${LEADERRUN_LEASE_TOKEN:-$LEADERRUN_TOKEN}`

// runOut runs a command to completion and returns its exit code, stdout and
// stderr. Two minutes bound it: a hang guard, not a time it must keep.
func runOut(t *testing.T, env []string, dir string, argv ...string) (int, string, string) {
	t.Helper()
	return runOutWithin(t, 2*time.Minute, env, dir, argv...)
}

// runOutWithin is runOut with the hang guard limit.
func runOutWithin(t *testing.T, limit time.Duration, env []string, dir string, argv ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee) && ctx.Err() == nil:
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("%q: %v (stderr: %s)", argv, err, errb.String())
	return -1, "", ""
}

// shOut runs a shell command line to completion in dir.
func shOut(t *testing.T, env []string, dir, line string) (int, string, string) {
	t.Helper()
	return runOut(t, env, dir, "/bin/sh", "-c", line)
}

// launchArgv starts argv as an lr (see helpers_test.go) with exactly env,
// so a check can read its stdout line by line, signal and wait for it.
func launchArgv(t *testing.T, env []string, dir string, withStdin bool, argv ...string) (*lr, io.WriteCloser) {
	t.Helper()
	p := newLR(t, exec.Command(argv[0], argv[1:]...))
	p.cmd.Env, p.cmd.Dir = env, dir
	// A group of its own, so that cleanup can kill a leaderrun started
	// through sh together with the sh; leaderrun's death takes its child
	// (PR_SET_PDEATHSIG), which closes the output pipes Wait waits for.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.WaitDelay = 10 * time.Second
	return p, p.begin(withStdin)
}

// waitWithin is lr.wait with a bound of the check's own.
func waitWithin(t *testing.T, p *lr, within time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		t.Fatalf("%v did not exit within %v (stderr: %s)", p.cmd.Args, within, p.stderr.String())
	}
	return p.wait()
}

// lineToken returns the last field of a stand-in's line, its fencing token.
func lineToken(t *testing.T, line string) uint64 {
	t.Helper()
	f := strings.Fields(line)
	if len(f) == 0 {
		t.Fatalf("empty line from a stand-in program")
	}
	n, err := strconv.ParseUint(f[len(f)-1], 10, 64)
	if err != nil {
		t.Fatalf("line %q does not end in a fencing token", line)
	}
	return n
}

// flagValue returns the value of --flag in a command line's words.
func flagValue(t *testing.T, words []string, flag string) string {
	t.Helper()
	for i, w := range words {
		if v, ok := strings.CutPrefix(w, flag+"="); ok {
			return v
		}
		if w == flag && i+1 < len(words) {
			return words[i+1]
		}
	}
	t.Fatalf("%q has no %s", words, flag)
	return ""
}

// afterDashDash returns the words after the first "--": COMMAND and ARGS.
func afterDashDash(t *testing.T, words []string) []string {
	t.Helper()
	i := slices.Index(words, "--")
	if i < 0 || i+1 >= len(words) {
		t.Fatalf("%q has no -- COMMAND", words)
	}
	return words[i+1:]
}

// readmeExit is the check of an `exit N` block.
func readmeExit(want int) func(*testing.T, *readmeFixture, *readmeBlock) {
	return func(t *testing.T, fx *readmeFixture, b *readmeBlock) {
		for b.next < len(b.cmds) {
			c := b.take(t, "")
			if code, out, stderr := shOut(t, fx.shellEnv(), fx.work, fx.subst(t, c.text)); code != want {
				t.Fatalf("%s:%d: %q: exit %d; want %d (stdout %q, stderr %q)", b.file, c.line, c.text, code, want, out, stderr)
			}
		}
	}
}

// Quick start: `go run . -- echo hello` works in the source tree and prints
// what the command prints; scripts/test.sh exists (it is what runs this test,
// so it is not run again here). The tree is the one under test rather than a
// copy, so `go run` finds TestMain's build in the cache; the install check
// builds in a copy.
func readmeQuickstart(t *testing.T, fx *readmeFixture, b *readmeBlock) {
	src, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	c := b.take(t, "go run . -- ")
	cmd := fx.subst(t, c.text)
	_, want, _ := shOut(t, fx.shellEnv(), fx.work, strings.Join(afterDashDash(t, strings.Fields(cmd)), " "))
	code, out, stderr := shOut(t, fx.shellEnv(), src, cmd)
	if code != 0 || out != want {
		t.Fatalf("%s:%d: %q: exit %d, stdout %q; want 0 and %q (stderr: %s)", b.file, c.line, c.text, code, out, want, stderr)
	}

	c = b.take(t, "scripts/test.sh")
	if c.text != "scripts/test.sh" {
		t.Fatalf("%s:%d: %q: the check only knows plain scripts/test.sh", b.file, c.line, c.text)
	}
	info, err := os.Stat(filepath.Join(src, c.text))
	if err != nil || info.Mode()&0o111 == 0 {
		t.Fatalf("%s:%d: %s is not an executable file in a clone: %v", b.file, c.line, c.text, err)
	}
}

// storePrograms are what an installation must hold: leaderrun, whose
// module is the leaderrun directory, the store programs, leaderrun-ping
// (--ping) and leaderrun-listen (--listen).
var storePrograms = []string{"leaderrun", "leaderrun-redis", "leaderrun-azblob", "leaderrun-etcd", "leaderrun-postgres", "leaderrun-mysql", "leaderrun-kubernetes", "leaderrun-s3", "leaderrun-gcs", "leaderrun-ping", "leaderrun-listen"}

// Install, in a copy of the tree as a fresh clone has it: the go build
// line installs leaderrun and every store program, executable and static
// (no program interpreter: the C library's dynamic loader costs a store
// program's every start 1 ms), into /usr/local/bin; the go install line,
// with GOBIN set to a temporary directory, would install exactly those
// programs too and none of the test tools under scripts/ or internal/.
// That line runs with -n (go prints its plan, each program's move into
// GOBIN, and builds nothing): the go build line has just linked the same
// packages with the same flags, and linking all ten again took over a
// minute of the suite's two cores.
func readmeInstall(t *testing.T, fx *readmeFixture, b *readmeBlock) {
	c := b.take(t, "CGO_ENABLED=0 go build ")
	clone := fx.cloneDir(t)
	dst := filepath.Join(fx.root, "usr/local/bin/leaderrun")
	for _, prog := range storePrograms {
		_ = os.Remove(filepath.Join(filepath.Dir(dst), prog))
	}
	cmd := fx.subst(t, c.text)
	// Linking the eleven programs is minutes of CPU on a loaded 2-core
	// machine (CI on a fresh one, beside the kube-apiserver build: killed
	// at two).
	if code, _, stderr := runOutWithin(t, 10*time.Minute, fx.shellEnv(), clone, "/bin/sh", "-c", cmd); code != 0 {
		t.Fatalf("%s:%d: %q: exit %d: %s", b.file, c.line, cmd, code, stderr)
	}
	for _, prog := range storePrograms {
		info, err := os.Stat(filepath.Join(filepath.Dir(dst), prog))
		if err != nil || info.Mode().Perm() != 0o755 {
			t.Fatalf("%s:%d: no mode 0755 %s in /usr/local/bin after the install: %v", b.file, c.line, prog, err)
		}
		if interp := elfInterpreter(t, filepath.Join(filepath.Dir(dst), prog)); interp != "" {
			t.Fatalf("%s:%d: the installed %s is dynamically linked (interpreter %s); want a static program", b.file, c.line, prog, interp)
		}
	}
	if code, out, stderr := runOut(t, fx.cronEnv(), fx.work, dst, "--version"); code != 0 || out == "" {
		t.Fatalf("installed leaderrun --version: exit %d, %q %s", code, out, stderr)
	}

	c = b.take(t, "CGO_ENABLED=0 go install ")
	gobin := t.TempDir()
	plan := strings.Replace(fx.subst(t, c.text), "go install ", "go install -n ", 1)
	code, _, stderr := shOut(t, append(fx.shellEnv(), "GOBIN="+gobin), clone, plan)
	if code != 0 {
		t.Fatalf("%s:%d: %q: exit %d: %s", b.file, c.line, plan, code, stderr)
	}
	var got []string
	for _, l := range strings.Split(stderr, "\n") {
		// mv $WORK/b001/exe/a.out GOBIN/leaderrun
		if f := strings.Fields(l); len(f) == 3 && f[0] == "mv" && filepath.Dir(f[2]) == gobin {
			got = append(got, filepath.Base(f[2]))
		}
	}
	slices.Sort(got)
	if want := slices.Sorted(slices.Values(storePrograms)); !slices.Equal(got, want) {
		t.Fatalf("%s:%d: %s installs %v; want exactly %v (no test tools in users' bin)", b.file, c.line, c.text, got, want)
	}
}

// elfInterpreter returns the program interpreter (PT_INTERP) the ELF
// program at path names, "" for a static program.
func elfInterpreter(t *testing.T, path string) string {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			b, err := io.ReadAll(p.Open())
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimRight(string(b), "\x00")
		}
	}
	return ""
}

// Usage: a second backup waits for the first and then runs, with a higher
// token; status says held (exit 0) while one runs and free (exit 3) after;
// status --json on Redis gives the documented fields.
func readmeUsage(t *testing.T, fx *readmeFixture, b *readmeBlock) {
	env := fx.shellEnv()
	backup := b.take(t, "leaderrun ")
	words := strings.Fields(fx.subst(t, backup.text))
	name := flagValue(t, words, "--name")
	child := afterDashDash(t, words)
	if !strings.HasPrefix(child[0], "./") {
		t.Fatalf("%s:%d: the check expects a ./script as COMMAND, not %q", b.file, backup.line, child[0])
	}
	// The stand-in prints its arguments and token, then runs until its stdin closes.
	writeScript(t, filepath.Join(fx.work, child[0]), `echo "backup $* `+readmeToken+`"; read -r _ || true`+"\n")
	wantLine := "backup " + strings.Join(child[1:], " ") + " "

	first, in1 := launchArgv(t, env, fx.work, true, "/bin/sh", "-c", fx.subst(t, backup.text))
	l1 := first.line()
	if !strings.HasPrefix(l1, wantLine) {
		t.Fatalf("first backup printed %q; want %q followed by its token", l1, wantLine)
	}
	second, in2 := launchArgv(t, env, fx.work, true, "/bin/sh", "-c", fx.subst(t, backup.text))

	status := b.take(t, "leaderrun status ")
	if f := strings.Fields(status.text); f[len(f)-1] != name {
		t.Fatalf("%s:%d: %q asks about another lease than the backup above (%s)", b.file, status.line, status.text, name)
	}
	code, out, stderr := shOut(t, env, fx.work, fx.subst(t, status.text))
	if code != 0 || !strings.HasPrefix(out, name+": held by ") {
		t.Fatalf("%s:%d: while a backup runs: exit %d, %q; want 0 and %q... (stderr: %s)", b.file, status.line, code, out, name+": held by ", stderr)
	}

	in1.Close()
	if c := first.wait(); c != 0 {
		t.Fatalf("first backup: exit %d: %s", c, first.stderr.String())
	}
	l2 := second.line()
	if !strings.HasPrefix(l2, wantLine) || lineToken(t, l2) <= lineToken(t, l1) {
		t.Fatalf("second backup printed %q after the first (%q); want it to run with a higher token", l2, l1)
	}
	in2.Close()
	if c := second.wait(); c != 0 {
		t.Fatalf("second backup: exit %d: %s", c, second.stderr.String())
	}
	code, out, _ = shOut(t, env, fx.work, fx.subst(t, status.text))
	if code != 3 || !strings.HasPrefix(out, name+": free") {
		t.Fatalf("%s:%d: after the backups: exit %d, %q; want 3 and %q", b.file, status.line, code, out, name+": free")
	}

	js := b.take(t, "leaderrun status --json ")
	jsCmd := fx.subst(t, js.text)
	jsWords := strings.Fields(jsCmd)
	store, jsName := flagValue(t, jsWords, "--store"), jsWords[len(jsWords)-1]
	holder, in := launchArgv(t, env, fx.work, true, lrBin, "--store", store, "--name", jsName, "--", "/bin/sh", "-c", `echo up; read -r _ || true`)
	holder.line()
	code, out, stderr = shOut(t, env, fx.work, jsCmd)
	var st struct {
		Name        string  `json:"name"`
		Held        bool    `json:"held"`
		Holder      string  `json:"holder"`
		Token       uint64  `json:"token"`
		Since       string  `json:"since"`
		RemainingMS float64 `json:"remaining_ms"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("%s:%d: while held: exit %d, %q (stderr: %s)", b.file, js.line, code, out, stderr)
	}
	if _, err := time.Parse(time.RFC3339Nano, st.Since); st.Name != jsName || !st.Held || st.Holder == "" || st.Token == 0 || err != nil || st.RemainingMS <= 0 {
		t.Fatalf("%s:%d: status --json while held: %s", b.file, js.line, out)
	}
	in.Close()
	if c := holder.wait(); c != 0 {
		t.Fatalf("holder of %s: exit %d: %s", jsName, c, holder.stderr.String())
	}
	code, out, _ = shOut(t, env, fx.work, jsCmd)
	st.Held = true
	if code != 3 || json.Unmarshal([]byte(out), &st) != nil || st.Held {
		t.Fatalf("%s:%d: once released: exit %d, %q; want 3 and held false", b.file, js.line, code, out)
	}
}

// readmeCronVarRE is a crontab line that sets a variable for the jobs.
var readmeCronVarRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// readmeHoldRE finds the example's --hold-at-least, which the cron check
// shortens to readmeHold so that the slot ends within the test.
var readmeHoldRE = regexp.MustCompile(`--hold-at-least \S+`)

const readmeHold = 3 * time.Second

// cron: with cron's environment, the job runs on exactly one of the hosts;
// the others exit 0 and print nothing (cron mails any output); a clean run
// prints nothing of leaderrun's either. With --hold-at-least, a host whose
// cron fires after the job finished but within the hold skips the slot too.
func readmeCron(t *testing.T, fx *readmeFixture, b *readmeBlock) {
	// The crontab's variable lines (PATH=...) replace cron's own.
	env := fx.cronEnv()
	c := b.take(t, "")
	for readmeCronVarRE.MatchString(c.text) {
		k, _, _ := strings.Cut(c.text, "=")
		env = slices.DeleteFunc(env, func(kv string) bool { return strings.HasPrefix(kv, k+"=") })
		env = append(env, fx.subst(t, c.text))
		c = b.take(t, "")
	}
	fields := strings.Fields(c.text)
	if len(fields) < 6 {
		t.Fatalf("%s:%d: %q is not a crontab line (5 time fields and a command)", b.file, c.line, c.text)
	}
	// A bare leaderrun must be found after either install: /usr/local/bin
	// (from a clone) and /usr/bin (the packages) both on the PATH.
	if fields[5] == "leaderrun" && !slices.ContainsFunc(env, func(kv string) bool {
		dirs := strings.Split(strings.TrimPrefix(kv, "PATH="), ":")
		return strings.HasPrefix(kv, "PATH=") && slices.Contains(dirs, fx.root+"/usr/local/bin") && slices.Contains(dirs, "/usr/bin")
	}) {
		t.Fatalf("%s:%d: cron's PATH is /usr/bin:/bin: set PATH with /usr/local/bin and /usr/bin, where the installs put leaderrun, or give its absolute path", b.file, c.line)
	}
	cmd := fx.subst(t, strings.Join(fields[5:], " "))
	held := readmeHoldRE.MatchString(cmd)
	cmd = readmeHoldRE.ReplaceAllString(cmd, "--hold-at-least "+readmeHold.String())
	fx.installed(t)
	job := afterDashDash(t, strings.Fields(cmd))[0]
	fx.underRoot(t, job)
	marks := filepath.Join(fx.work, "cron.marks")
	// The stand-in job records each run, says so, and runs until its stdin
	// closes (cron's /dev/null ends it at once).
	writeScript(t, job, fmt.Sprintf("echo \"ran $$ %s\" >> %s\necho running\nread -r _ || true\n", readmeToken, marks))

	begun := time.Now() // the leader's acquisition comes after this
	leader, in := launchArgv(t, env, fx.root, true, "/bin/sh", "-c", cmd)
	if l := leader.line(); l != "running" {
		t.Fatalf("the job printed %q", l)
	}
	for i := range 3 {
		code, out, stderr := shOut(t, env, fx.root, cmd)
		if code != 0 || out != "" || stderr != "" {
			t.Fatalf("%s:%d: host %d while the job runs elsewhere: exit %d, stdout %q, stderr %q; want 0 and nothing", b.file, c.line, i+2, code, out, stderr)
		}
	}
	in.Close()
	if code := leader.wait(); code != 0 || leader.stderr.String() != "" {
		t.Fatalf("%s:%d: the running job: exit %d, stderr %q; want 0 and nothing", b.file, c.line, code, leader.stderr.String())
	}
	if held {
		if time.Since(begun) < readmeHold-500*time.Millisecond {
			code, out, stderr := shOut(t, env, fx.root, cmd)
			if code != 0 || out != "" || stderr != "" {
				t.Fatalf("%s:%d: a late host within the hold: exit %d, stdout %q, stderr %q; want 0 and nothing", b.file, c.line, code, out, stderr)
			}
		} else {
			t.Logf("the job ran past the hold of %v; the late host is not tried", readmeHold)
		}
		// The hold ends at a time: there is no event to await.
		time.Sleep(time.Until(begun.Add(readmeHold + 500*time.Millisecond)))
	}
	code, out, stderr := shOut(t, env, fx.root, cmd)
	if code != 0 || out != "running\n" || stderr != "" {
		t.Fatalf("%s:%d: the next run: exit %d, stdout %q, stderr %q; want the job's own output only", b.file, c.line, code, out, stderr)
	}
	b2, err := os.ReadFile(marks)
	if err != nil {
		t.Fatal(err)
	}
	if runs := strings.Count(string(b2), "ran "); runs != 2 {
		t.Fatalf("the job ran %d times; want 2 (the first run and the one after it, nor the others while it ran or held):\n%s", runs, b2)
	}
}

// unitFile is a parsed systemd unit: section → key → values in order.
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, body []string) unitFile {
	t.Helper()
	u := unitFile{}
	sec := ""
	for _, l := range body {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#") || strings.HasPrefix(l, ";"):
		case strings.HasPrefix(l, "[") && strings.HasSuffix(l, "]"):
			sec = l[1 : len(l)-1]
			u[sec] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || sec == "" {
				t.Fatalf("unit line %q", l)
			}
			u[sec][k] = append(u[sec][k], v)
		}
	}
	return u
}

// one returns the last value of a key (systemd's rule for single-valued
// keys), or def.
func (u unitFile) one(sec, key, def string) string {
	if v := u[sec][key]; len(v) > 0 {
		return v[len(v)-1]
	}
	return def
}

// unitDuration parses a systemd time span of the forms this check knows
// ("5s", "100ms", "1min30s" is not among them).
func unitDuration(t *testing.T, key, v string) time.Duration {
	t.Helper()
	d, err := time.ParseDuration(v)
	if err != nil {
		if n, err2 := strconv.Atoi(v); err2 == nil {
			return time.Duration(n) * time.Second
		}
		t.Fatalf("%s=%s: the check reads only Go-style spans such as 30s: %v", key, v, err)
	}
	return d
}

// systemd: the unit's timeouts
// fit together, and its exact Environment= and ExecStart= run a worker on
// one host, keep the standby waiting, stop cleanly on SIGTERM to the main
// process (KillMode=mixed) within TimeoutStopSec with a success status, and
// let the standby take over. TestUnitFilesVerify runs systemd-analyze verify
// on it.
func readmeSystemd(t *testing.T, fx *readmeFixture, b *readmeBlock) {
	u := parseUnit(t, b.body)
	if slices.Contains(strings.Fields(strings.Join(u["Unit"]["After"], " ")), "network-online.target") &&
		!slices.Contains(strings.Fields(strings.Join(u["Unit"]["Wants"], " ")), "network-online.target") {
		t.Errorf("After=network-online.target without Wants=network-online.target does not wait for the network")
	}

	env := []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"} // systemd's default
	unitEnv := map[string]string{}
	for _, v := range u["Service"]["Environment"] {
		if strings.ContainsAny(v, `"' `) {
			t.Fatalf("Environment=%s: the check reads one unquoted assignment per line", v)
		}
		v = fx.subst(t, v)
		k, val, _ := strings.Cut(v, "=")
		unitEnv[k] = val
		env = append(env, v)
	}
	grace := 3 * time.Second
	if g, ok := unitEnv["LEADERRUN_GRACE"]; ok {
		grace = unitDuration(t, "LEADERRUN_GRACE", g)
	}
	stopTimeout := unitDuration(t, "TimeoutStopSec", u.one("Service", "TimeoutStopSec", "90s"))
	if stopTimeout <= grace {
		t.Errorf("TimeoutStopSec=%v is not longer than the grace %v: systemd's SIGKILL would cut leaderrun's stop short", stopTimeout, grace)
	}
	if r := u.one("Service", "Restart", "no"); r != "no" {
		restartSec := unitDuration(t, "RestartSec", u.one("Service", "RestartSec", "100ms"))
		interval := unitDuration(t, "StartLimitIntervalSec", u.one("Unit", "StartLimitIntervalSec", "10s"))
		burst, err := strconv.Atoi(u.one("Unit", "StartLimitBurst", "5"))
		if err != nil {
			t.Fatal(err)
		}
		if time.Duration(burst)*restartSec <= interval {
			t.Errorf("Restart=%s every RestartSec=%v reaches the start limit (%d starts in %v)", r, restartSec, burst, interval)
		}
	}
	codes := func(key string) []int {
		var c []int
		for _, f := range strings.Fields(strings.Join(u["Service"][key], " ")) {
			if n, err := strconv.Atoi(f); err == nil {
				c = append(c, n)
			}
		}
		return c
	}
	success := append([]int{0}, codes("SuccessExitStatus")...)
	// A lost lease (exit 124) must put the host back into standby.
	restart := u.one("Service", "Restart", "no")
	if !(restart == "always" || restart == "on-failure" && !slices.Contains(success, 124)) ||
		slices.Contains(codes("RestartPreventExitStatus"), 124) {
		t.Errorf("Restart=%s: a unit whose lease was lost (exit 124) is not restarted into standby", restart)
	}

	execs := u["Service"]["ExecStart"]
	if len(execs) != 1 {
		t.Fatalf("want one ExecStart=, got %q", execs)
	}
	b.cmds = []readmeCmd{{b.line, execs[0]}}
	c := b.take(t, "leaderrun ")
	if strings.ContainsAny(c.text, `"'%$`) {
		t.Fatalf("ExecStart=%s: the check splits only plain words", c.text)
	}
	// systemd finds a bare leaderrun in /usr/local/bin (the install from a
	// clone puts it there) before /usr/bin (the packages').
	argv := strings.Fields(fx.subst(t, c.text))
	argv[0] = fx.installed(t)
	worker := afterDashDash(t, argv)[0]
	fx.underRoot(t, worker)
	// The stand-in worker prints its PID and token, then runs until a signal ends it.
	writeScript(t, worker, `echo "worker $$ `+readmeToken+`"`+"\nexec sleep 600\n")

	leader, _ := launchArgv(t, env, "/", false, argv...)
	l1 := leader.line()
	standby, _ := launchArgv(t, env, "/", false, argv...)
	code, out, stderr := runOut(t, env, "/", argv[0], "status", unitEnv["LEADERRUN_NAME"])
	if code != 0 || !strings.Contains(out, fmt.Sprintf(":%d ", leader.cmd.Process.Pid)) {
		t.Fatalf("status while the first unit runs: exit %d, %q (stderr: %s); want it held by pid %d", code, out, stderr, leader.cmd.Process.Pid)
	}

	stop := func(p *lr, line string) {
		t.Helper()
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil { // KillMode=mixed: the main process only
			t.Fatal(err)
		}
		code := waitWithin(t, p, stopTimeout)
		if !slices.Contains(success, code) {
			t.Fatalf("systemctl stop: leaderrun exited %d, which systemd counts as a failure (success: %v): %s", code, success, p.stderr.String())
		}
		pid, err := strconv.Atoi(strings.Fields(line)[1])
		if err != nil {
			t.Fatalf("worker line %q", line)
		}
		if alive(pid) {
			t.Fatalf("the worker (pid %d) outlived leaderrun", pid)
		}
	}
	stop(leader, l1)
	l2 := standby.line()
	if lineToken(t, l2) <= lineToken(t, l1) {
		t.Fatalf("the standby's worker has token %d, not above the first's %d", lineToken(t, l2), lineToken(t, l1))
	}
	stop(standby, l2)
}

// CI: the step's env and run line, with the secret pointing at the test's
// Redis: two jobs started at once both succeed, one after the other, with
// increasing tokens.
func readmeCI(t *testing.T, fx *readmeFixture, b *readmeBlock) {
	env := fx.shellEnv()
	inEnv := false
	for _, l := range b.body {
		s := strings.TrimSpace(shStripComment(l))
		switch {
		case s == "env:":
			inEnv = true
		case strings.HasPrefix(s, "run:"):
			inEnv = false
			b.cmds = append(b.cmds, readmeCmd{b.line, strings.TrimSpace(strings.TrimPrefix(s, "run:"))})
		case inEnv && strings.HasPrefix(l, "    ") && s != "":
			k, v, ok := strings.Cut(s, ":")
			if !ok {
				t.Fatalf("env line %q", l)
			}
			v = strings.Trim(strings.TrimSpace(v), `"'`)
			if strings.Contains(v, "${{ secrets.LEADERRUN_REDIS_URL }}") {
				v = strings.ReplaceAll(v, "${{ secrets.LEADERRUN_REDIS_URL }}", "redis://"+fx.subst(t, "redis.internal"))
			}
			if strings.Contains(v, "${{") {
				t.Fatalf("env %s: %s: the check knows no such expression", k, v)
			}
			env = append(env, k+"="+fx.subst(t, v))
		default:
			inEnv = false
		}
	}
	c := b.take(t, "leaderrun ")
	cmd := fx.subst(t, c.text)
	script := afterDashDash(t, strings.Fields(cmd))[0]
	marks := filepath.Join(fx.work, "ci.marks")
	writeScript(t, filepath.Join(fx.work, script), fmt.Sprintf(
		"echo \"start $$ %s\" >> %s\nsleep 0.1\necho \"end $$\" >> %s\n", readmeToken, marks, marks))
	var jobs []*lr
	for range 2 {
		p, _ := launchArgv(t, env, fx.work, false, "/bin/sh", "-c", cmd)
		jobs = append(jobs, p)
	}
	for i, p := range jobs {
		if code := p.wait(); code != 0 {
			t.Fatalf("%s:%d: CI job %d: exit %d: %s", b.file, c.line, i, code, p.stderr.String())
		}
	}
	if runs := checkMarks(t, marks); runs != 2 {
		t.Fatalf("%d deploys ran; want 2", runs)
	}
}

// lrArgv returns a command's words with a leading `leaderrun` replaced by
// the fixture's program, as PATH would find it after an install.
func lrArgv(t *testing.T, fx *readmeFixture, b *readmeBlock, c readmeCmd) []string {
	t.Helper()
	if strings.ContainsAny(c.text, `"'$|;<>`) {
		t.Fatalf("%s:%d: %q: the check splits only plain words", b.file, c.line, c.text)
	}
	words := strings.Fields(c.text)
	if words[0] != "leaderrun" {
		t.Fatalf("%s:%d: %q does not start with leaderrun", b.file, c.line, c.text)
	}
	return append([]string{fx.bin}, words[1:]...)
}

// Demo: the first contender (started in the background) takes the lease and
// runs its command; the second, with -n, gets exit 75 without running its
// own and says who holds it; status says held (exit 0); `kill %1` (SIGTERM to
// the background job) stops the first's command and frees the lease, which
// status then shows (exit 3).
func readmeDemo(t *testing.T, fx *readmeFixture, b *readmeBlock) {
	env := fx.shellEnv()
	c := b.take(t, "leaderrun ")
	bg, ok := strings.CutSuffix(c.text, " &")
	if !ok {
		t.Fatalf("%s:%d: %q: the first contender runs in the background (&)", b.file, c.line, c.text)
	}
	argv := lrArgv(t, fx, b, readmeCmd{c.line, bg})
	name := flagValue(t, argv, "--name")
	first, _ := launchArgv(t, env, fx.work, false, argv...)
	waitStderr(t, first, "lease "+name+" acquired", time.Minute)
	// What the demo prints, in the order a terminal shows it, for the
	// README's output block.
	var transcript []string
	firstSeen := len(first.stderrLines())
	transcript = append(transcript, first.stderrLines()...)

	c = b.take(t, "leaderrun -n ")
	argv = lrArgv(t, fx, b, c)
	if flagValue(t, argv, "--name") != name {
		t.Fatalf("%s:%d: %q contends for another lease than %s", b.file, c.line, c.text, name)
	}
	code, out, stderr := runOut(t, env, fx.work, argv...)
	if code != 75 || out != "" || !strings.Contains(stderr, "held by ") {
		t.Fatalf("%s:%d: the second contender: exit %d, stdout %q, stderr %q; want 75, no output of its command, and who holds the lease", b.file, c.line, code, out, stderr)
	}
	transcript = append(transcript, strings.Split(strings.TrimRight(stderr, "\n"), "\n")...)

	c = b.take(t, "leaderrun status ")
	status := lrArgv(t, fx, b, c)
	code, out, stderr = runOut(t, env, fx.work, status...)
	if code != 0 || !strings.HasPrefix(out, name+": held by ") {
		t.Fatalf("%s:%d: status while the first runs: exit %d, %q (stderr %s); want 0 and %q...", b.file, c.line, code, out, stderr, name+": held by ")
	}
	transcript = append(transcript, strings.Split(strings.TrimRight(out, "\n"), "\n")...)

	c = b.take(t, "kill %1")
	if err := first.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := first.wait(); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("%s:%d: the first contender after kill: exit %d; want %d, its command killed by the forwarded SIGTERM (stderr: %s)", b.file, c.line, code, 128+int(syscall.SIGTERM), first.stderr.String())
	}
	transcript = append(transcript, first.stderrLines()[firstSeen:]...)
	readmeCompareOutput(t, b, transcript)
	code, out, _ = runOut(t, env, fx.work, status...)
	if code != 3 || !strings.HasPrefix(out, name+": free") {
		t.Fatalf("%s:%d: status after kill: exit %d, %q; want 3 and %q", b.file, c.line, code, out, name+": free")
	}
}

// readmeVaryRE finds what differs from one run of an example to the next:
// times (with their zone), dates, ages, tokens, holders (host:pid) and pids.
var readmeVaryRE = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`\b\d{4}-\d{2}-\d{2} `), ""},
	{regexp.MustCompile(`\b\d{2}:\d{2}:\d{2}(\.\d+)?( [A-Z][A-Za-z]{1,5}\b| [+-]\d{2,4}\b)?`), "TIME"},
	{regexp.MustCompile(`\(\d+(\.\d+)?(ns|µs|ms|s|m|h) ago\)`), "(AGE ago)"},
	{regexp.MustCompile(`\b\d{10,}\b`), "TOKEN"},
	{regexp.MustCompile(`[\w.-]+:\d+\b`), "HOST:PID"},
	{regexp.MustCompile(`\bpid[=:] ?\d+\b`), "pid=PID"},
}

// readmeNormal replaces what readmeVaryRE finds by placeholders.
func readmeNormal(l string) string {
	for _, v := range readmeVaryRE {
		l = v.re.ReplaceAllString(l, v.with)
	}
	return strings.TrimRight(l, " ")
}

// readmeCompareOutput compares what a block's commands printed with the
// ```text block shown right after it, line by line, allowing times, ages,
// tokens, holders and pids to differ. With LEADERRUN_UPDATE_README=1 it
// writes the output into that block instead (then review the diff).
func readmeCompareOutput(t *testing.T, b *readmeBlock, got []string) {
	t.Helper()
	if b.output == nil {
		t.Fatalf("%s:%d: no ```text block right after the block shows what it prints", b.file, b.line)
	}
	if os.Getenv("LEADERRUN_UPDATE_README") == "1" {
		src, err := os.ReadFile(b.file)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(src), "\n")
		// The body lies between the fences at lines output.line and output.end.
		lines = slices.Concat(lines[:b.output.line], got, lines[b.output.end-1:])
		if err := os.WriteFile(b.file, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s:%d: wrote the output of this run", b.file, b.output.line)
		return
	}
	want := b.output.body
	for i := range max(len(want), len(got)) {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if readmeNormal(w) != readmeNormal(g) {
			t.Errorf("%s:%d: the output shown differs from what the example prints now (times, tokens, holders and pids aside):\n  shown: %q\n  now:   %q\nall of it now:\n%s\n(LEADERRUN_UPDATE_README=1 go test ./e2e -run 'TestReadmeExamples/%s' writes it into the block)",
				b.file, b.output.line+1+i, w, g, strings.Join(got, "\n"), b.marker)
			return
		}
	}
}

// Shell script: while another instance holds the lease the line succeeds
// without running the job; once free it runs the job; a job that fails
// makes the line fail with the job's own code (3, not 1), and a job that
// cannot be run with leaderrun's (127).
func readmeScript(t *testing.T, fx *readmeFixture, b *readmeBlock) {
	env := fx.shellEnv()
	c := b.take(t, "leaderrun ")
	cmd := fx.subst(t, c.text)
	words := strings.Fields(cmd)
	name := flagValue(t, words, "--name")
	job := afterDashDash(t, words)[0]
	if !strings.HasPrefix(job, "./") {
		t.Fatalf("%s:%d: the check expects a ./script as COMMAND, not %q", b.file, c.line, job)
	}
	marks := filepath.Join(fx.work, "script.marks")
	status := filepath.Join(fx.work, "script.status")
	// The stand-in records its run and exits with the code in script.status.
	writeScript(t, filepath.Join(fx.work, job), fmt.Sprintf("echo ran >> %s\nexit $(cat %s)\n", marks, status))
	if err := os.WriteFile(status, []byte("0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := func() int {
		b, err := os.ReadFile(marks)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
		return strings.Count(string(b), "ran\n")
	}

	holder, in := launchArgv(t, env, fx.work, true, lrBin, "--name", name, "--", "/bin/sh", "-c", "echo up; read -r _ || true")
	holder.line()
	if code, out, stderr := shOut(t, env, fx.work, cmd); code != 0 || runs() != 0 {
		t.Fatalf("%s:%d: while another instance holds %s: exit %d, %d runs (stdout %q, stderr %q); want 0 and no run", b.file, c.line, name, code, runs(), out, stderr)
	}
	in.Close()
	if code := holder.wait(); code != 0 {
		t.Fatalf("the other instance: exit %d: %s", code, holder.stderr.String())
	}
	if code, _, stderr := shOut(t, env, fx.work, cmd); code != 0 || runs() != 1 {
		t.Fatalf("%s:%d: with the lease free: exit %d, %d runs (stderr %q); want 0 and one run", b.file, c.line, code, runs(), stderr)
	}
	if err := os.WriteFile(status, []byte("3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := shOut(t, env, fx.work, cmd); code != 3 || runs() != 2 {
		t.Fatalf("%s:%d: a job that exits 3: exit %d, %d runs; want the job's own 3 and a second run", b.file, c.line, code, runs())
	}
	if err := os.Remove(filepath.Join(fx.work, job)); err != nil {
		t.Fatal(err)
	}
	if code, _, stderr := shOut(t, env, fx.work, cmd); code != 127 || runs() != 2 {
		t.Fatalf("%s:%d: with %s missing: exit %d, %d runs (stderr %q); want leaderrun's 127 and no run", b.file, c.line, job, code, runs(), stderr)
	}
}

// readmeHistory: the history block's check says MISSED (exit 2) before any
// run; after one run of the job under that name on the same store, history
// shows it and check says OK (exit 0).
func readmeHistory(t *testing.T, fx *readmeFixture, b *readmeBlock) {
	env := fx.shellEnv()
	hist := b.take(t, "leaderrun history ")
	check := b.take(t, "leaderrun check ")
	hw, cw := strings.Fields(fx.subst(t, hist.text)), strings.Fields(fx.subst(t, check.text))
	name, store := hw[len(hw)-1], flagValue(t, hw, "--store")
	if cw[len(cw)-1] != name || flagValue(t, cw, "--store") != store {
		t.Fatalf("%s:%d: history and check ask about different leases or stores", b.file, check.line)
	}
	if code, out, stderr := shOut(t, env, fx.work, fx.subst(t, check.text)); code != 2 || !strings.HasPrefix(out, "MISSED: "+name) {
		t.Fatalf("%s:%d: before any run: exit %d, %q (%s); want 2 and MISSED", b.file, check.line, code, out, stderr)
	}
	if code, _, stderr := shOut(t, env, fx.work, "leaderrun -q --store "+store+" --name "+name+" -- true"); code != 0 {
		t.Fatalf("the job: exit %d: %s", code, stderr)
	}
	if code, out, stderr := shOut(t, env, fx.work, fx.subst(t, hist.text)); code != 0 || !strings.Contains(out, "ok (exit 0)") {
		t.Fatalf("%s:%d: after a run: exit %d, %q (%s); want the run, ok (exit 0)", b.file, hist.line, code, out, stderr)
	}
	if code, out, stderr := shOut(t, env, fx.work, fx.subst(t, check.text)); code != 0 || !strings.HasPrefix(out, "OK: "+name) {
		t.Fatalf("%s:%d: after a run: exit %d, %q (%s); want 0 and OK", b.file, check.line, code, out, stderr)
	}
}
