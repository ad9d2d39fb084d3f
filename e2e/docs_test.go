package e2e

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
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
// safety rule that page has.
func TestNoUnreachableCitations(t *testing.T) {
	t.Parallel()
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
	ensure := regexp.MustCompile(`apt_ensure\b[^\n]*?--((?:[ \t]+[a-z0-9.+-]+)+)`)
	found := 0
	for _, s := range scripts {
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ensure.FindAllStringSubmatch(string(b), -1) {
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
