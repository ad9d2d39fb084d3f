package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/ptytest"
	"github.com/leaderrun/leaderrun/lease/storetab"
)

// docFiles are the Markdown documents whose code blocks TestReadmeExamples
// runs and whose links TestDocLinks checks: README.md and docs/*.md.
func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no docs/*.md: the README's topics live there")
	}
	return append([]string{"README.md"}, files...)
}

var (
	// mdLinkRE finds inline Markdown links: [text](target).
	mdLinkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	// mdHeadingRE finds ATX headings.
	mdHeadingRE = regexp.MustCompile(`(?m)^#{1,6} +(.+?) *$`)
	// mdSlugDropRE is what GitHub drops from a heading to make its anchor.
	mdSlugDropRE = regexp.MustCompile(`[^\p{L}\p{N} _-]`)
)

// mdAnchors returns the anchors GitHub gives the headings of a Markdown
// text: lower case, punctuation dropped, spaces to hyphens, and -1, -2 for
// repeats.
func mdAnchors(text string) map[string]bool {
	anchors := map[string]bool{}
	inFence := false
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			inFence = !inFence
			continue
		}
		m := mdHeadingRE.FindStringSubmatch(l)
		if inFence || m == nil {
			continue
		}
		slug := strings.ReplaceAll(mdSlugDropRE.ReplaceAllString(strings.ToLower(m[1]), ""), " ", "-")
		a := slug
		for i := 1; anchors[a]; i++ {
			a = fmt.Sprintf("%s-%d", slug, i)
		}
		anchors[a] = true
	}
	return anchors
}

// TestDocLinks: every relative link of README.md and docs/*.md names a file
// of the repository, and every #anchor a heading of its target, so moving a
// section cannot leave a reader at a dead link.
func TestDocLinks(t *testing.T) {
	t.Parallel()
	for _, file := range docFiles(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for i, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, m := range mdLinkRE.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), path)
				}
				info, err := os.Stat(dest)
				if err != nil {
					t.Errorf("%s:%d: link %s: %v", file, i+1, target, err)
					continue
				}
				if anchor == "" {
					continue
				}
				if info.IsDir() || !strings.HasSuffix(dest, ".md") {
					t.Errorf("%s:%d: link %s: an anchor into a file that is not Markdown", file, i+1, target)
					continue
				}
				db, err := os.ReadFile(dest)
				if err != nil {
					t.Fatal(err)
				}
				if !mdAnchors(string(db))[anchor] {
					t.Errorf("%s:%d: link %s: %s has no heading with that anchor", file, i+1, target, dest)
				}
			}
		}
	}
}

// TestNoUnreachableCitations: no Go comment cites a document a reader of
// the repository cannot open (the working spec, cited as "DESIGN" and a
// section sign), and every citation of docs/design.md names a section or a
// safety rule that page has. Neither the code (its tests too) nor the
// documents cite an issue of a tracker the reader cannot open ("issue 12",
// "issue #12"): they say the reason itself.
func TestNoUnreachableCitations(t *testing.T) {
	t.Parallel()
	tracker := regexp.MustCompile(`(?i)\bissues?\s+#?\d+`)
	for _, doc := range docFiles(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range tracker.FindAllIndex(b, -1) {
			t.Errorf("%s:%d: cites %q of a tracker the reader cannot open: say the reason itself", doc, 1+strings.Count(string(b[:m[0]]), "\n"), b[m[0]:m[1]])
		}
	}
	design, err := os.ReadFile("docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^(\d+)\. \*\*`).FindAllStringSubmatch(string(design), -1) {
		rules[m[1]] = true
	}
	anchors := mdAnchors(string(design))
	spec := regexp.MustCompile(`DESIGN\s*(?://\s*)?§`)
	cite := regexp.MustCompile(`docs/design\.md(?:,|:)\s*(?://\s*)?(safety rules? ([\d-]+)|[a-z ]+)`)
	err = filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (p == ".git" || p == ".tools" || p == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || p == "e2e/docs_test.go" {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		line := func(off int) int { return 1 + strings.Count(string(b[:off]), "\n") }
		for _, m := range spec.FindAllIndex(b, -1) {
			t.Errorf("%s:%d: cites the working spec, which is not in the repository: cite docs/design.md instead", p, line(m[0]))
		}
		for _, m := range tracker.FindAllIndex(b, -1) {
			t.Errorf("%s:%d: cites %q of a tracker the reader cannot open: say the reason itself", p, line(m[0]), b[m[0]:m[1]])
		}
		for _, m := range cite.FindAllSubmatchIndex(b, -1) {
			if m[4] >= 0 {
				for _, n := range strings.Split(string(b[m[4]:m[5]]), "-") {
					if !rules[n] {
						t.Errorf("%s:%d: cites safety rule %s, which docs/design.md does not have", p, line(m[0]), n)
					}
				}
				continue
			}
			sec := strings.TrimSpace(string(b[m[2]:m[3]]))
			found := false
			for a := range anchors {
				if strings.Contains(strings.ReplaceAll(a, "-", " "), sec) {
					found = true
				}
			}
			if !found {
				t.Errorf("%s:%d: cites docs/design.md section %q, which it does not have", p, line(m[0]), sec)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestDevelopmentDocListsInstalls: docs/development.md names every Debian
// package that scripts/test.sh or the server scripts it runs install, so
// its description matches what the command does to a machine.
func TestDevelopmentDocListsInstalls(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/development.md")
	if err != nil {
		t.Fatal(err)
	}
	scripts, err := filepath.Glob("scripts/*.sh")
	if err != nil {
		t.Fatal(err)
	}
	// apt_ensure ... -- PACKAGE..., a packages=(...) list given to it, and
	// apt_extract PROGRAM PACKAGE.
	ensure := regexp.MustCompile(`apt_ensure\b[^\n]*?--((?:[ \t]+[a-z0-9.+-]+)+)|\bpackages=\(([a-z0-9.+ -]+)\)|apt_extract [a-z0-9-]+ ([a-z0-9.+-]+)`)
	found := 0
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ensure.FindAllStringSubmatch(string(b), -1) {
			m[1] += " " + m[2] + " " + m[3]
			for _, pkg := range strings.Fields(m[1]) {
				found++
				if !strings.Contains(string(doc), "`"+pkg+"`") {
					t.Errorf("%s installs %s; docs/development.md does not say so", s, pkg)
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("no apt_ensure call found in scripts/*.sh")
	}
}

// unitHeaderRE is the comment that names a unit file inside an ```ini block
// holding one or more of them: `# /etc/systemd/system/NAME.service`.
var unitHeaderRE = regexp.MustCompile(`^#\s*(/etc/systemd/system/\S+\.(?:service|timer|socket|path|conf))\s*$`)

// docUnit is one unit file or drop-in shown in the documentation.
type docUnit struct {
	where string   // file:line of the block
	path  string   // where it is installed, relative to /
	body  []string // its lines
}

// docUnits returns every unit file and drop-in of the ```ini blocks of
// README.md and docs/*.md, run or not-run: a block is one file, or several
// each under a `# /etc/systemd/system/...` comment; one without such a
// comment is a unit of its own, named after its line.
func docUnits(t *testing.T) []docUnit {
	t.Helper()
	var units []docUnit
	for _, f := range docFiles(t) {
		for _, b := range readmeParse(t, f) {
			if b.info != "ini" {
				continue
			}
			where := fmt.Sprintf("%s:%d", b.file, b.line)
			cur := -1
			for _, l := range b.body {
				if m := unitHeaderRE.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
					units = append(units, docUnit{where, strings.TrimPrefix(m[1], "/"), nil})
					cur = len(units) - 1
					continue
				}
				if cur < 0 {
					name := fmt.Sprintf("%s-%d.service", strings.ToLower(strings.TrimSuffix(filepath.Base(b.file), ".md")), b.line)
					units = append(units, docUnit{where, "etc/systemd/system/" + name, nil})
					cur = len(units) - 1
				}
				units[cur].body = append(units[cur].body, l)
			}
		}
	}
	return units
}

// unitRootPath rewrites a unit line for a test root: absolute paths of the
// examples (/usr/local, /etc, /opt, ...) and the packages' /usr/bin/leaderrun
// move under root, and an Exec line whose program is a bare `leaderrun` gets
// root's /usr/local/bin/leaderrun, where systemd's search path finds it first.
func unitRootPath(root, l string) string {
	l = readmeRootRE.ReplaceAllString(l, "${1}"+root+"/${2}/")
	l = strings.ReplaceAll(l, "/usr/bin/leaderrun", root+"/usr/bin/leaderrun")
	if k, v, ok := strings.Cut(l, "="); ok && strings.HasPrefix(strings.TrimSpace(k), "Exec") {
		prefix := strings.TrimLeft(v, "-@:+!")
		if w, _, _ := strings.Cut(prefix, " "); w == "leaderrun" {
			l = k + "=" + v[:len(v)-len(prefix)] + root + "/usr/local/bin/" + prefix
		}
	}
	return l
}

// TestUnitFilesVerify: every unit file and drop-in that README.md and docs/
// show (not-run blocks too) and the packaged template unit pass
// `systemd-analyze verify` without a warning, with their paths moved under a
// temporary root where the leaderrun this test built is the ExecStart
// program (as /usr/local/bin/leaderrun, where the install from a clone puts
// it, and /usr/bin/leaderrun, the packages'). So a key in the wrong section
// (OnFailure= under [Service], which systemd ignores) or a program that
// does not exist fails here.
func TestUnitFilesVerify(t *testing.T) {
	t.Parallel()
	sa := systemdAnalyze(t)
	root := t.TempDir()
	prog, err := os.ReadFile(lrBin)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"usr/local/bin", "usr/bin", "etc/default", "etc/systemd/system"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"usr/local/bin", "usr/bin"} {
		if err := os.WriteFile(filepath.Join(root, d, "leaderrun"), prog, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	units := docUnits(t)
	packaged, err := os.ReadFile("scripts/package/leaderrun@.service")
	if err != nil {
		t.Fatal(err)
	}
	// The packaged template sits beside the documented units, so that a
	// documented drop-in for it applies.
	units = append(units, docUnit{"scripts/package/leaderrun@.service", "etc/systemd/system/leaderrun@.service", strings.Split(string(packaged), "\n")})
	sandboxed, err := os.ReadFile("scripts/package/leaderrun-sandboxed@.service")
	if err != nil {
		t.Fatal(err)
	}
	units = append(units, docUnit{"scripts/package/leaderrun-sandboxed@.service", "etc/systemd/system/leaderrun-sandboxed@.service", strings.Split(string(sandboxed), "\n")})
	// alert@.service is "whatever notifies you" in docs/usage.md: a stand-in.
	units = append(units, docUnit{"(test stand-in)", "etc/systemd/system/alert@.service", []string{"[Service]", "Type=oneshot", "ExecStart=/bin/true"}})
	files := map[string]bool{}
	for _, u := range units {
		if !strings.HasPrefix(u.path, "etc/systemd/system/") {
			t.Fatalf("%s: %s: the test installs units only under /etc/systemd/system", u.where, u.path)
		}
		var sb strings.Builder
		for _, l := range u.body {
			sb.WriteString(unitRootPath(root, l) + "\n")
		}
		p := filepath.Join(root, u.path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		files[u.path] = true
	}
	if len(units) < 5 {
		t.Fatalf("found only %d units in the docs: %v", len(units), units)
	}
	for _, u := range units {
		// A drop-in is verified with the unit it belongs to, which must be
		// among the units verified.
		unit := u.path
		if dir := filepath.Dir(u.path); strings.HasSuffix(dir, ".d") {
			unit = strings.TrimSuffix(dir, ".d")
			if !files[unit] {
				t.Errorf("%s: a drop-in for %s, which neither the docs nor the package have", u.where, unit)
				continue
			}
		}
		// --man=no: Documentation=man:leaderrun(1) is checked by the
		// package test, where the man page is installed.
		out, err := exec.Command(sa, "verify", "--man=no", filepath.Join(root, unit)).CombinedOutput()
		if err != nil || len(out) != 0 {
			t.Errorf("%s: systemd-analyze verify %s: %v\n%s", u.where, u.path, err, out)
		}
	}
}

// systemdAnalyze returns the systemd-analyze program, failing the test
// without it with the line that installs it.
func systemdAnalyze(t *testing.T) string {
	t.Helper()
	return needTool(t, "systemd-analyze", "systemd")
}

// exposureRE reads systemd-analyze security's verdict.
var exposureRE = regexp.MustCompile(`Overall exposure level for \S+: (\d+\.\d+) (\S+)`)

// TestSandboxDropIn: the packaged template unit leaderrun@.service runs
// jobs as root without a sandbox (systemd-analyze security rates it
// UNSAFE); the drop-in that docs/systemd.md shows makes it OK, runs the job
// as another user, and keeps what leaderrun needs to make the job's cgroup:
// Delegate=yes and a writable /sys/fs/cgroup (no ProtectControlGroups=, no
// ProtectKernelTunables=). The packaged leaderrun-sandboxed@.service is
// exactly leaderrun@.service with the drop-in's settings, and rates OK.
func TestSandboxDropIn(t *testing.T) {
	t.Parallel()
	sa := systemdAnalyze(t)
	const dropIn = "etc/systemd/system/leaderrun@.service.d/sandbox.conf"
	var sandbox *docUnit
	for _, u := range docUnits(t) {
		if u.path == dropIn {
			sandbox = &u
		}
	}
	if sandbox == nil {
		t.Fatalf("no docs block shows /%s", dropIn)
	}
	if !strings.HasPrefix(sandbox.where, "docs/systemd.md:") {
		t.Errorf("%s: the sandboxing drop-in belongs in docs/systemd.md", sandbox.where)
	}
	u := parseUnit(t, sandbox.body)
	if u.one("Service", "DynamicUser", "no") != "yes" && u.one("Service", "User", "") == "" {
		t.Errorf("%s: neither DynamicUser=yes nor User=: the job still runs as root", sandbox.where)
	}
	for _, k := range []string{"ProtectControlGroups", "ProtectKernelTunables"} {
		if v := u.one("Service", k, "no"); v != "no" {
			t.Errorf("%s: %s=%s makes /sys/fs/cgroup read-only: leaderrun could not make the job's cgroup", sandbox.where, k, v)
		}
	}
	if v := u.one("Service", "Delegate", "yes"); v != "yes" {
		t.Errorf("%s: Delegate=%s: leaderrun could not make the job's cgroup", sandbox.where, v)
	}
	packaged, err := os.ReadFile("scripts/package/leaderrun@.service")
	if err != nil {
		t.Fatal(err)
	}
	if pu := parseUnit(t, strings.Split(string(packaged), "\n")); pu.one("Service", "Delegate", "") != "yes" {
		t.Errorf("the packaged unit lacks Delegate=yes")
	}

	exposure := func(withDropIn bool) (float64, string) {
		t.Helper()
		dir := t.TempDir()
		unit := filepath.Join(dir, "leaderrun@.service")
		if err := os.WriteFile(unit, packaged, 0o644); err != nil {
			t.Fatal(err)
		}
		if withDropIn {
			if err := os.MkdirAll(unit+".d", 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(unit+".d", "sandbox.conf"), []byte(strings.Join(sandbox.body, "\n")+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out, _ := exec.Command(sa, "security", "--offline=yes", "--no-pager", filepath.Join(dir, "leaderrun@billing.service")).CombinedOutput()
		m := exposureRE.FindStringSubmatch(string(out))
		if m == nil {
			t.Fatalf("systemd-analyze security: no verdict in\n%s", out)
		}
		f, err := strconv.ParseFloat(m[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		return f, m[2]
	}
	before, verdict := exposure(false)
	after, verdictAfter := exposure(true)
	t.Logf("systemd-analyze security: packaged unit %.1f %s; with the drop-in %.1f %s", before, verdict, after, verdictAfter)

	// The sandboxed template: the packaged unit's settings and the
	// drop-in's, no more, no fewer.
	sb, err := os.ReadFile("scripts/package/leaderrun-sandboxed@.service")
	if err != nil {
		t.Fatal(err)
	}
	su := parseUnit(t, strings.Split(string(sb), "\n"))
	want := parseUnit(t, strings.Split(string(packaged), "\n"))
	for k, v := range u["Service"] {
		want["Service"][k] = v // a drop-in's value replaces the unit's
	}
	want["Unit"]["Description"] = su["Unit"]["Description"]
	if !strings.Contains(strings.Join(su["Unit"]["Description"], ""), "sandbox") {
		t.Errorf("leaderrun-sandboxed@.service: its Description does not say it is sandboxed")
	}
	if fmt.Sprint(su) != fmt.Sprint(want) {
		t.Errorf("leaderrun-sandboxed@.service is not leaderrun@.service with docs/systemd.md's drop-in:\n got %v\nwant %v", su, want)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "leaderrun-sandboxed@.service"), sb, 0o644); err != nil {
		t.Fatal(err)
	}
	out, _ := exec.Command(sa, "security", "--offline=yes", "--no-pager", filepath.Join(dir, "leaderrun-sandboxed@billing.service")).CombinedOutput()
	m := exposureRE.FindStringSubmatch(string(out))
	if m == nil {
		t.Fatalf("systemd-analyze security: no verdict in\n%s", out)
	}
	if f, err := strconv.ParseFloat(m[1], 64); err != nil || f >= 4 || m[2] != "OK" {
		t.Errorf("leaderrun-sandboxed@.service rates %s %s; want below 4.0, OK", m[1], m[2])
	}
	t.Logf("systemd-analyze security: leaderrun-sandboxed@.service %s %s", m[1], m[2])
	if before < 9 {
		t.Errorf("the packaged unit rates %.1f %s: docs/systemd.md says 9.6, UNSAFE", before, verdict)
	}
	if after >= 4 || verdictAfter != "OK" {
		t.Errorf("with docs/systemd.md's drop-in the unit rates %.1f %s; want below 4.0, OK", after, verdictAfter)
	}
}

// TestColoursAsDocumented: what docs/usage.md and the man page say about
// colours. On a terminal the "leaderrun:" prefix is coloured, unless
// NO_COLOR is set to something or TERM is dumb (NO_COLOR set empty does not
// count); into a pipe nothing is.
func TestColoursAsDocumented(t *testing.T) {
	t.Parallel()
	store := fileStore(t)
	base := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "LEADERRUN_STORE=" + store}
	for _, c := range []struct {
		env    []string
		colour bool
	}{
		{[]string{"TERM=xterm"}, true},
		{[]string{"TERM=xterm", "NO_COLOR="}, true},
		{[]string{"TERM=xterm", "NO_COLOR=1"}, false},
		{[]string{"TERM=dumb"}, false},
	} {
		master, slave := ptytest.Open(t)
		tm := ptytest.NewTerm(t, master)
		cmd := exec.Command(lrBin, "--name", "colours", "--", "true")
		cmd.Env = slices.Concat(base, c.env)
		cmd.Stdout, cmd.Stderr = slave, slave
		err := cmd.Run()
		slave.Close()
		if err != nil {
			t.Fatalf("%v: %v\n%s", c.env, err, tm.Output())
		}
		before := tm.Expect("leaderrun:", 30*time.Second)
		if got := strings.Contains(before, "\x1b["); got != c.colour {
			t.Errorf("%v, stderr a terminal: coloured %v, want %v (%q)", c.env, got, c.colour, tm.Output())
		}
	}
	cmd := exec.Command(lrBin, "--name", "colours", "--", "true")
	cmd.Env = append(base, "TERM=xterm")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "leaderrun:") || strings.Contains(string(out), "\x1b") {
		t.Errorf("TERM=xterm, stderr a pipe: %v, %q; want leaderrun's lines without colour", err, out)
	}
}

// crontabLineRE is a crontab entry: five time fields (or an @ schedule) and
// a command.
var crontabLineRE = regexp.MustCompile(`^(?:@(?:reboot|yearly|annually|monthly|weekly|daily|hourly)|(?:[0-9*/,-]+\s+){4}[0-9*/,A-Za-z-]+)\s+(.+)$`)

// leaderrunWordRE is a bare `leaderrun` run as a command, found on PATH.
var leaderrunWordRE = regexp.MustCompile(`(?:^|[;&|(]\s*|&&\s*|\s)leaderrun(?:\s|$)`)

// TestCrontabsSetPath: every crontab line in README.md and docs/*.md (run
// or not-run, in any block) that runs a bare `leaderrun` comes after a
// PATH= line of its block with /usr/local/bin and /usr/bin, as the README's
// crontab does: cron's own PATH is /usr/bin:/bin, which misses the install
// from a clone.
func TestCrontabsSetPath(t *testing.T) {
	t.Parallel()
	found := 0
	for _, f := range docFiles(t) {
		for _, b := range readmeParse(t, f) {
			if b.info != "sh" && b.info != "bash" && b.info != "cron" && b.info != "" {
				continue
			}
			path := ""
			for i, l := range b.body {
				l = strings.TrimSpace(l)
				if v, ok := strings.CutPrefix(l, "PATH="); ok {
					path = v
					continue
				}
				m := crontabLineRE.FindStringSubmatch(l)
				if m == nil || !leaderrunWordRE.MatchString(m[1]) {
					continue
				}
				found++
				dirs := strings.Split(path, ":")
				if !slices.Contains(dirs, "/usr/local/bin") || !slices.Contains(dirs, "/usr/bin") {
					t.Errorf("%s:%d: a crontab line runs leaderrun without a PATH= line with /usr/local/bin and /usr/bin before it (cron's PATH is /usr/bin:/bin)", b.file, b.line+1+i)
				}
			}
		}
	}
	if found < 3 {
		t.Fatalf("found %d crontab lines that run leaderrun in the docs; want the README's and docs/usage.md's", found)
	}
}

// TestNoGoInstallLatest: no document or message advises `go install
// …@latest`, which cannot work while the module is not published; only the
// README's Install section names it, to say so.
func TestNoGoInstallLatest(t *testing.T) {
	t.Parallel()
	files := docFiles(t)
	for _, dir := range []string{"cmd", "internal", "lease", "runner"} { // the programs' messages
		err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasSuffix(p, ".go") && !strings.HasSuffix(p, "_test.go") {
				files = append(files, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		paras := strings.Split(string(b), "\n\n")
		for _, p := range paras {
			if strings.Contains(p, "@latest") && !(f == "README.md" && strings.Contains(p, "not published")) {
				t.Errorf("%s: advises @latest, which does not work while the module is not published:\n%s", f, p)
			}
		}
	}
}

// TestDocsNameEveryScheme: every scheme of the store table (storetab) is
// named, as SCHEME://, by --help, by README.md's table of the stores and
// by docs/stores.md, so that a store added to the table and not to the
// docs (or a scheme dropped from a help text written by hand) fails here.
// internal/gendocs' TestManNamesEveryScheme checks the man page and the
// completions.
func TestDocsNameEveryScheme(t *testing.T) {
	t.Parallel()
	help, err := exec.Command(lrBin, "--help").Output()
	if err != nil {
		t.Fatalf("leaderrun --help: %v", err)
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	stores, err := os.ReadFile("docs/stores.md")
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]string{
		"leaderrun --help":        string(help),
		"README.md's store table": mdTableWith(string(readme), "| | file |"),
		"docs/stores.md":          string(stores),
	}
	for what, text := range docs {
		if text == "" {
			t.Errorf("%s: not found", what)
			continue
		}
		for _, s := range storetab.Schemes() {
			if !namesScheme(text, s) {
				t.Errorf("%s does not name %s://", what, s)
			}
		}
	}
}

// namesScheme reports whether text has scheme:// where no longer scheme
// ends (redis:// inside rediss:// or unix+redis:// does not count).
func namesScheme(text, scheme string) bool {
	return regexp.MustCompile(`(^|[^a-z0-9+.-])` + regexp.QuoteMeta(scheme) + `://`).MatchString(text)
}

// mdTableWith returns the Markdown table of text whose header line begins
// with header, or "".
func mdTableWith(text, header string) string {
	var rows []string
	for _, l := range strings.Split(text, "\n") {
		switch {
		case len(rows) == 0 && strings.HasPrefix(l, header):
			rows = append(rows, l)
		case len(rows) > 0 && strings.HasPrefix(l, "|"):
			rows = append(rows, l)
		case len(rows) > 0:
			return strings.Join(rows, "\n")
		}
	}
	return strings.Join(rows, "\n")
}
