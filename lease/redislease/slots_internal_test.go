package redislease

import "testing"

// TestSlotKeys: a slot's record and channel carry its lease's hash tag and
// its counter is the lease's own, so the acquire script touches one hash
// slot on a Cluster; a lease without slots keeps its keys.
func TestSlotKeys(t *testing.T) {
	for _, tc := range []struct{ name, record, counter, channel string }{
		{"job", "leaderrun:{job}", "leaderrun:{job}:token", "leaderrun:{job}:released"},
		{"job~2", "leaderrun:{job}~2", "leaderrun:{job}:token", "leaderrun:{job}~2:released"},
		{"a/b~17", "leaderrun:{a/b}~17", "leaderrun:{a/b}:token", "leaderrun:{a/b}~17:released"},
	} {
		if got := recordKey(tc.name); got != tc.record {
			t.Errorf("recordKey(%q) = %q; want %q", tc.name, got, tc.record)
		}
		if got := counterKey(tc.name); got != tc.counter {
			t.Errorf("counterKey(%q) = %q; want %q", tc.name, got, tc.counter)
		}
		if got := releaseChan(tc.name); got != tc.channel {
			t.Errorf("releaseChan(%q) = %q; want %q", tc.name, got, tc.channel)
		}
	}
}
