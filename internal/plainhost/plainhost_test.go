package plainhost

import "testing"

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		h       string
		port    string
		hasPort bool
		ok      bool
	}{
		{"redis.example", "", false, true},
		{"h:6379", "6379", true, true},
		{"h:", "", true, true},
		{"[::1]:5432", "5432", true, true},
		{"[::1]", "", false, true},
		{"[::1", "", false, false},
		{"[fe80::1%eth0]", "", false, false},
		{"u:pass@h", "", false, false},
		{"h:pw", "", false, false},
		{"h:1:2", "", false, false},
		{"sp ace", "", false, false},
	} {
		port, hasPort, ok := Split(tc.h)
		if port != tc.port || hasPort != tc.hasPort || ok != tc.ok {
			t.Errorf("Split(%q) = %q, %v, %v; want %q, %v, %v", tc.h, port, hasPort, ok, tc.port, tc.hasPort, tc.ok)
		}
	}
}

func TestPort(t *testing.T) {
	for p, want := range map[string]bool{"1": true, "65535": true, "0": false, "65536": false, "": false, "+1": false, "08": true, "x": false} {
		if Port(p) != want {
			t.Errorf("Port(%q) = %v, want %v", p, !want, want)
		}
	}
}
