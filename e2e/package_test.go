package e2e

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease/storetab"
)

// The package a user installs: scripts/release.sh builds the release (for
// amd64 only, to stay fast), the archive and the .deb hold the README, docs/,
// the copyright and the third-party licences, the .deb recommends
// bash-completion and installs with dpkg on this machine, and then, from
// /usr/bin, the README's demo runs, --version prints the stamped version, the
// man page renders, the bash completion completes `--st`, and the template
// unit verifies. The package is purged afterwards, also when
// the test fails, so the machine is as before.
func TestDebPackage(t *testing.T) {
	t.Parallel() // other tests run the test's own build, by absolute path or first on PATH
	ci := os.Getenv("CI") != ""
	need := func(why string) {
		t.Helper()
		if ci {
			t.Fatalf("%s: the package test must run under CI", why)
		}
		t.Skip(why)
	}
	if os.Geteuid() != 0 {
		need("not root: dpkg -i needs it")
	}
	for _, prog := range []string{"dpkg", "man", "systemd-analyze", "gzip", "sha256sum"} {
		if _, err := exec.LookPath(prog); err != nil {
			need(prog + " not found")
		}
	}
	if err := exec.Command("dpkg", "-s", "leaderrun").Run(); err == nil {
		need("a leaderrun package is already installed; this test would replace it")
	}
	if _, err := os.Stat("/usr/bin/leaderrun"); err == nil {
		need("/usr/bin/leaderrun exists; this test would replace it")
	}

	const version = "0.0.0-pkgtest"
	out := t.TempDir()
	cmd := exec.Command("scripts/release.sh", "--arch", "amd64", "--out", out, "--allow-dirty", version)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(goBin())+":"+os.Getenv("PATH"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("scripts/release.sh %s: %v\n%s", version, err, b)
	}
	dist := filepath.Join(out, version)

	sums := exec.Command("sha256sum", "-c", "checksums.txt")
	sums.Dir = dist
	if b, err := sums.CombinedOutput(); err != nil {
		t.Fatalf("sha256sum -c checksums.txt: %v\n%s", err, b)
	}
	archive := filepath.Join(dist, "leaderrun_"+version+"_linux_amd64.tar.gz")
	names := tarNames(t, archive)
	// Every program, and the README with the docs/ it links to.
	for _, p := range append(slices.Clone(storePrograms), packageDocs...) {
		if !slices.Contains(names, "leaderrun_"+version+"_linux_amd64/"+p) {
			t.Errorf("%s has no %s: %q", filepath.Base(archive), p, names)
		}
	}
	debs, _ := filepath.Glob(filepath.Join(dist, "*.deb"))
	rpms, _ := filepath.Glob(filepath.Join(dist, "*.rpm"))
	if len(debs) != 1 || len(rpms) != 1 {
		t.Fatalf("want one .deb and one .rpm in %s; got %q %q", dist, debs, rpms)
	}

	t.Cleanup(func() {
		if b, err := exec.Command("dpkg", "--purge", "leaderrun").CombinedOutput(); err != nil {
			t.Errorf("dpkg --purge leaderrun: %v\n%s", err, b)
		}
		if _, err := os.Stat("/usr/bin/leaderrun"); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("/usr/bin/leaderrun is still there after dpkg --purge: %v", err)
		}
	})
	if b, err := exec.Command("dpkg-deb", "-f", debs[0], "Recommends").Output(); err != nil || !strings.Contains(string(b), "bash-completion") {
		t.Errorf("dpkg-deb -f %s Recommends: %q, %v; want bash-completion", filepath.Base(debs[0]), b, err)
	}
	if b, err := exec.Command("dpkg-deb", "-f", debs[0], "Description").Output(); err != nil || !strings.Contains(string(b), "kubernetes://") {
		t.Errorf("dpkg-deb -f %s Description: %q, %v; want every store, kubernetes:// too", filepath.Base(debs[0]), b, err)
	}
	if b, err := exec.Command("dpkg", "-i", debs[0]).CombinedOutput(); err != nil {
		t.Fatalf("dpkg -i %s: %v\n%s", debs[0], err, b)
	}
	for _, d := range packageDocs {
		if info, err := os.Stat("/usr/share/doc/leaderrun/" + d); err != nil || info.Size() == 0 {
			t.Errorf("/usr/share/doc/leaderrun/%s: %v", d, err)
		}
	}

	for _, p := range storePrograms {
		if info, err := os.Stat("/usr/bin/" + p); err != nil || info.Mode().Perm()&0o111 == 0 {
			t.Errorf("/usr/bin/%s is not an installed program: %v", p, err)
		}
	}
	if b, err := exec.Command("/usr/bin/leaderrun", "--version").Output(); err != nil || !strings.HasPrefix(string(b), "leaderrun "+version+" ") {
		t.Errorf("/usr/bin/leaderrun --version: %q, %v; want the stamped %s", b, err, version)
	}
	// The commit too, where Go can read it: a clone, whose .git is a
	// directory (in a git worktree it is a file, and release.sh warns).
	if st, err := os.Stat(".git"); err == nil && st.IsDir() {
		rev, err := exec.Command("git", "rev-parse", "HEAD").Output()
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := exec.Command("/usr/bin/leaderrun", "--version").Output(); !strings.Contains(string(b), "commit "+string(rev[:12])) {
			t.Errorf("/usr/bin/leaderrun --version: %q; want commit %s", b, rev[:12])
		}
	}

	t.Run("demo", func(t *testing.T) {
		fx := newReadmeFixture(t)
		fx.bin = "/usr/bin/leaderrun"
		for _, b := range readmeParse(t, "README.md") {
			if b.marker == "demo" {
				readmeDemo(t, fx, b)
				b.allTaken(t)
				return
			}
		}
		t.Fatal("README.md has no demo block")
	})

	t.Run("man", func(t *testing.T) {
		m := exec.Command("man", "-l", "/usr/share/man/man1/leaderrun.1.gz")
		m.Env = append(os.Environ(), "MANPAGER=cat", "PAGER=cat", "MANWIDTH=80")
		b, err := m.Output()
		if err != nil || !strings.Contains(string(b), "distributed lease") || !strings.Contains(string(b), "--store") {
			t.Fatalf("man -l leaderrun.1.gz: %v\n%s", err, b)
		}
	})

	t.Run("bash completion", func(t *testing.T) {
		script := `source /usr/share/bash-completion/completions/leaderrun
complete -p leaderrun
COMP_WORDS=(leaderrun --st); COMP_CWORD=1; _leaderrun; printf 'reply %s\n' "${COMPREPLY[@]}"
COMP_WORDS=(leaderrun st); COMP_CWORD=1; _leaderrun; printf 'reply %s\n' "${COMPREPLY[@]}"
COMP_WORDS=(leaderrun status --j); COMP_CWORD=2; _leaderrun; printf 'reply %s\n' "${COMPREPLY[@]}"`
		b, err := exec.Command("bash", "--norc", "--noprofile", "-c", script).CombinedOutput()
		want := "complete -F _leaderrun leaderrun\nreply --stop-signal\nreply --store\nreply status\nreply --json\n"
		if err != nil || string(b) != want {
			t.Fatalf("bash completion: %v\n%s\nwant:\n%s", err, b, want)
		}
	})

	t.Run("unit", func(t *testing.T) {
		for _, unit := range []string{"/usr/lib/systemd/system/leaderrun@.service", "/usr/lib/systemd/system/leaderrun-sandboxed@.service"} {
			b, err := exec.Command("systemd-analyze", "verify", unit).CombinedOutput()
			if err != nil || len(b) != 0 {
				t.Fatalf("systemd-analyze verify %s: %v\n%s", unit, err, b)
			}
		}
		if _, err := os.Stat("/etc/default/leaderrun"); err != nil {
			t.Fatalf("the unit's environment file: %v", err)
		}
	})
}

// packageDocs are the documents every package ships (under
// /usr/share/doc/leaderrun, and at the top of the archive).
var packageDocs = []string{"README.md", "docs/usage.md", "docs/stores.md", "docs/systemd.md", "copyright", "LICENSE", "THIRD_PARTY_LICENSES"}

// TestPackageDescriptionNamesStores: the packages' Description names the
// URL scheme of every store program (cmd/leaderrun-NAME serves NAME://,
// or the first scheme of its row in the store table).
func TestPackageDescriptionNamesStores(t *testing.T) {
	t.Parallel()
	nfpm, err := os.ReadFile("scripts/package/nfpm.yaml")
	if err != nil {
		t.Fatal(err)
	}
	desc, _, _ := strings.Cut(string(nfpm[strings.Index(string(nfpm), "\ndescription:"):]), "\nhomepage:")
	desc = strings.Join(strings.Fields(desc), " ")
	progs, err := filepath.Glob("cmd/leaderrun-*")
	if err != nil || len(progs) < 5 {
		t.Fatalf("store programs: %q, %v", progs, err)
	}
	for _, p := range progs {
		scheme := strings.TrimPrefix(filepath.Base(p), "leaderrun-")
		if scheme == "ping" || scheme == "listen" { // helpers, not stores
			continue
		}
		for _, r := range storetab.All() {
			if r.Program == filepath.Base(p) {
				scheme = r.Schemes[0] // leaderrun-gcs serves gs://
			}
		}
		if !strings.Contains(desc, scheme+"://") {
			t.Errorf("scripts/package/nfpm.yaml: the description does not name %s:// (%s):%s", scheme, p, desc)
		}
	}
}

// apacheLicenseSHA256 is the SHA-256 of the Apache License 2.0's text as
// apache.org publishes it (www.apache.org/licenses/LICENSE-2.0.txt), which
// is also Debian's /usr/share/common-licenses/Apache-2.0.
const apacheLicenseSHA256 = "cfc7749b96f63bd31c3c42b5c471bf756814053e847c10f3eb003417bc523d30"

// TestLicenceStated: the project's licence, the Apache License 2.0, is
// LICENSE (its standard text, unchanged), and the packages' copyright
// file, their metadata and the README's last section say so.
func TestLicenceStated(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if sum := sha256.Sum256(text); hex.EncodeToString(sum[:]) != apacheLicenseSHA256 {
		t.Errorf("LICENSE is not the Apache License 2.0's standard text (SHA-256 %x)", sum)
	}
	if debian, err := os.ReadFile("/usr/share/common-licenses/Apache-2.0"); err == nil && !bytes.Equal(debian, text) {
		t.Errorf("LICENSE differs from /usr/share/common-licenses/Apache-2.0")
	}
	read := func(p string) string {
		t.Helper()
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cr := read("scripts/package/copyright")
	if files, _, _ := strings.Cut(cr[strings.Index(cr, "Files: *"):]+"\n\n", "\n\n"); !strings.Contains(files, "\nLicense: Apache-2.0") {
		t.Errorf("scripts/package/copyright: its Files: * paragraph does not say License: Apache-2.0:\n%s", cr)
	}
	if !strings.Contains(cr, "\nLicense: Apache-2.0\n Licensed under the Apache License, Version 2.0") || strings.Contains(cr, "none") {
		t.Errorf("scripts/package/copyright lacks the Apache-2.0 licence paragraph, or still says none was chosen:\n%s", cr)
	}
	if !regexp.MustCompile(`(?m)^license: Apache-2.0$`).MatchString(read("scripts/package/nfpm.yaml")) {
		t.Errorf("scripts/package/nfpm.yaml: want license: Apache-2.0 (the packages' metadata)")
	}
	readme := read("README.md")
	last := readme[strings.LastIndex(readme, "\n## "):]
	if !strings.Contains(last, "Apache License 2.0") || !strings.Contains(last, "(LICENSE)") || !strings.Contains(last, "THIRD_PARTY_LICENSES") {
		t.Errorf("README's last section does not name the Apache License 2.0 with links to LICENSE and THIRD_PARTY_LICENSES:\n%s", last)
	}
}

// tarNames lists the entries of a .tar.gz.
func tarNames(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(z)
	var names []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, strings.TrimSuffix(h.Name, "/"))
	}
}
