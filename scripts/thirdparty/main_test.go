package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// listed returns the module lines ("PATH VERSION: LICENCES") of a
// THIRD_PARTY_LICENSES text: those before the first licence text.
func listed(text []byte) map[string]bool {
	head, _, _ := strings.Cut(string(text), "\n==== ")
	mods := map[string]bool{}
	for _, l := range strings.Split(head, "\n") {
		if f := strings.Fields(l); len(f) >= 3 && strings.HasSuffix(f[1], ":") && strings.Contains(f[0], ".") && !strings.HasPrefix(l, "Go's") {
			mods[l] = true
		}
	}
	return mods
}

// TestThirdPartyLicensesCurrent: THIRD_PARTY_LICENSES lists exactly the
// modules linked into the programs, at their versions, with their licence
// texts from the module cache: a module that go.mod gains for the programs
// (or a new version) fails here until the file is written again.
func TestThirdPartyLicensesCurrent(t *testing.T) {
	if err := os.Chdir("../.."); err != nil {
		t.Fatal(err)
	}
	want, err := generate()
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(File)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, want) {
		return
	}
	g, w := listed(got), listed(want)
	for l := range w {
		if !g[l] {
			t.Errorf("%s lacks %q", File, l)
		}
	}
	for l := range g {
		if !w[l] {
			t.Errorf("%s lists %q, which the programs do not link (at that version)", File, l)
		}
	}
	t.Errorf("%s is out of date with the programs' modules: run go run ./scripts/thirdparty and commit it", File)
}

// identify names the licences the dependencies use, and no other text.
func TestIdentify(t *testing.T) {
	for text, want := range map[string]string{
		"Apache License\n Version 2.0, January 2004":                                                      "Apache-2.0",
		"Permission is hereby granted, free of charge, to any person":                                     "MIT",
		"Redistribution and use in source and binary forms ... Neither the name of Google":                "BSD-3-Clause",
		"Redistribution and use in source and binary forms, with or without\nmodification, are permitted": "BSD-2-Clause",
		"Permission to use, copy, modify, and/or distribute this software for any purpose":                "ISC",
		"This product includes software developed at CoreOS, Inc.":                                        "",
	} {
		if got := identify(text); got != want {
			t.Errorf("identify(%q) = %q; want %q", text, got, want)
		}
	}
}
