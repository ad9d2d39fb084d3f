// Command thirdparty writes THIRD_PARTY_LICENSES: every module linked into
// leaderrun's programs (leaderrun and cmd/leaderrun-*, built as
// scripts/release.sh builds them) with its version and licence, then the
// licence files themselves as each module ships them (an identical text is
// given once), read from the module cache. Its test fails when the file
// and the build's dependency graph differ, so a module that go.mod gains
// for the programs is listed before it ships.
//
//	go run ./scripts/thirdparty            # rewrite THIRD_PARTY_LICENSES
//	go run ./scripts/thirdparty -check     # exit 1 when it is out of date
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// File is the list's path, relative to the repository's root.
const File = "THIRD_PARTY_LICENSES"

// buildTags and buildEnv are the release's: they decide which modules link.
var (
	buildTags = "urfave_cli_no_docs"
	buildEnv  = []string{"CGO_ENABLED=0", "GOOS=linux"}
	programs  = []string{".", "./cmd/..."}
)

// module is one linked module and the licence files that apply to it.
type module struct {
	Path, Version string
	Dir           string
	files         []string // licence files: the module's root, and linked packages' own
}

// pkg is what go list -json says of a package.
type pkg struct {
	Dir    string
	Module *struct {
		Path, Version, Dir string
		Main               bool
		Replace            *struct{ Path, Version, Dir string }
	}
}

// linked returns the modules linked into the programs, sorted by path.
func linked() ([]*module, error) {
	args := append([]string{"list", "-deps", "-tags", buildTags, "-json=Dir,Module"}, programs...)
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), buildEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list: %w: %s", err, stderr.String())
	}
	mods := map[string]*module{}
	dirs := map[string][]string{} // module path → its linked packages' directories
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("go list: %w", err)
		}
		if p.Module == nil || p.Module.Main {
			continue // the standard library, or leaderrun itself
		}
		m := p.Module
		version, dir := m.Version, m.Dir
		if m.Replace != nil {
			version, dir = m.Replace.Version, m.Replace.Dir
		}
		if mods[m.Path] == nil {
			mods[m.Path] = &module{Path: m.Path, Version: version, Dir: dir}
		}
		dirs[m.Path] = append(dirs[m.Path], p.Dir)
	}
	var list []*module
	for _, m := range mods {
		seen := map[string]bool{}
		// The module's own licence, then any of a linked package's
		// directory (code copied in from elsewhere, under its own terms).
		for _, d := range append([]string{m.Dir}, dirs[m.Path]...) {
			for _, f := range licenceFiles(d) {
				if !seen[f] {
					seen[f] = true
					m.files = append(m.files, f)
				}
			}
		}
		if len(m.files) == 0 {
			return nil, fmt.Errorf("%s %s: no LICENSE, COPYING or NOTICE file in %s", m.Path, m.Version, m.Dir)
		}
		list = append(list, m)
	}
	slices.SortFunc(list, func(a, b *module) int { return strings.Compare(a.Path, b.Path) })
	return list, nil
}

// licenceFileRE names the files that hold a licence or its notices.
var licenceFileRE = regexp.MustCompile(`(?i)^(licen[cs]e|copying|notice)([.-].*)?$`)

// licenceFiles are dir's licence files, sorted.
func licenceFiles(dir string) []string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var files []string
	for _, e := range ents {
		if !e.IsDir() && licenceFileRE.MatchString(e.Name()) {
			files = append(files, filepath.Join(dir, e.Name()))
		}
	}
	return files
}

// identify names a licence text by its SPDX identifier, or "" when it is
// none of those the dependencies use (a NOTICE, a licence not yet seen).
func identify(text string) string {
	t := strings.Join(strings.Fields(text), " ")
	has := func(s string) bool { return strings.Contains(t, s) }
	switch {
	case has("Apache License") && has("Version 2.0"):
		return "Apache-2.0"
	case has("Mozilla Public License Version 2.0"), has("Mozilla Public License, version 2.0"):
		return "MPL-2.0"
	case has("Permission is hereby granted, free of charge"):
		return "MIT"
	case has("Permission to use, copy, modify, and/or distribute this software for any purpose"), has("Permission to use, copy, modify, and distribute this software for any purpose with or without fee"):
		return "ISC"
	case has("Redistribution and use in source and binary forms"):
		if has("Neither the name") || has("names of its contributors") || has("name of the copyright holder") {
			return "BSD-3-Clause"
		}
		return "BSD-2-Clause"
	}
	return ""
}

// render writes the list: a header, one line per module, then the texts.
func render(mods []*module) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`leaderrun's programs (leaderrun and leaderrun-*) are released under the
Apache License 2.0 (LICENSE). They are statically linked with Go's standard
library and runtime and with the modules below; each module's licence files
follow the list, as the module ships them (a text identical to one above is
not repeated). Written by ` + "`go run ./scripts/thirdparty`" + ` from the module
cache; its test fails when this list and the programs' dependencies differ.

Go's standard library and runtime: BSD-3-Clause (the Go Authors)
`)
	type text struct{ id, body, first string }
	var texts []*text
	byBody := map[string]*text{}
	goroot, err := exec.Command("go", "env", "GOROOT").Output()
	if err != nil {
		return nil, fmt.Errorf("go env GOROOT: %w", err)
	}
	raw, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(goroot)), "LICENSE"))
	if err != nil {
		return nil, err
	}
	if id := identify(string(raw)); id != "BSD-3-Clause" {
		return nil, fmt.Errorf("Go's LICENSE reads as %q, not BSD-3-Clause", id)
	}
	goText := &text{"BSD-3-Clause", strings.TrimRight(string(raw), "\n ") + "\n", "Go's standard library and runtime LICENSE"}
	byBody[goText.body] = goText
	texts = append(texts, goText)
	lines := []string{}
	for _, m := range mods {
		var ids []string
		for _, f := range m.files {
			raw, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			body := strings.TrimRight(strings.ReplaceAll(string(raw), "\r\n", "\n"), "\n ") + "\n"
			id := identify(body)
			if id == "" && !strings.HasPrefix(strings.ToUpper(filepath.Base(f)), "NOTICE") {
				return nil, fmt.Errorf("%s %s: %s: a licence this program does not recognise; check it and teach identify", m.Path, m.Version, f)
			}
			if id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
			name := m.Path + " " + strings.TrimPrefix(filepath.ToSlash(strings.TrimPrefix(f, m.Dir)), "/")
			if t := byBody[body]; t != nil {
				texts = append(texts, &text{id, "(the same text as " + t.first + " above)\n", name})
				continue
			}
			t := &text{id, body, name}
			byBody[body] = t
			texts = append(texts, t)
		}
		if len(ids) == 0 {
			return nil, fmt.Errorf("%s %s: only NOTICE files, no licence", m.Path, m.Version)
		}
		lines = append(lines, fmt.Sprintf("%s %s: %s", m.Path, m.Version, strings.Join(ids, ", ")))
	}
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	for _, t := range texts {
		fmt.Fprintf(&b, "\n==== %s\n\n%s", t.first, t.body)
	}
	return b.Bytes(), nil
}

// generate returns THIRD_PARTY_LICENSES as it should be.
func generate() ([]byte, error) {
	mods, err := linked()
	if err != nil {
		return nil, err
	}
	return render(mods)
}

func main() {
	check := flag.Bool("check", false, "do not write: exit 1 when "+File+" is out of date")
	flag.Parse()
	want, err := generate()
	if err != nil {
		fmt.Fprintln(os.Stderr, "thirdparty:", err)
		os.Exit(1)
	}
	if *check {
		got, err := os.ReadFile(File)
		if err != nil || !bytes.Equal(got, want) {
			fmt.Fprintf(os.Stderr, "thirdparty: %s is out of date with the programs' modules: run go run ./scripts/thirdparty and commit it\n", File)
			os.Exit(1)
		}
		return
	}
	if err := os.WriteFile(File, want, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "thirdparty:", err)
		os.Exit(1)
	}
}
