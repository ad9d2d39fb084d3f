package lease_test

import (
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

func TestSlotNames(t *testing.T) {
	for _, tc := range []struct {
		name string
		k    int
		want string
	}{{"job", 0, "job"}, {"job", 1, "job~1"}, {"a/b", 42, "a/b~42"}} {
		got := lease.SlotName(tc.name, tc.k)
		if got != tc.want {
			t.Errorf("SlotName(%q, %d) = %q; want %q", tc.name, tc.k, got, tc.want)
		}
		name, k, ok := lease.ParseSlotName(got)
		if name != tc.name || k != tc.k || ok != (tc.k > 0) {
			t.Errorf("ParseSlotName(%q) = %q, %d, %v", got, name, k, ok)
		}
		if err := lease.ValidateStoreName(got); err != nil {
			t.Errorf("ValidateStoreName(%q): %v", got, err)
		}
	}
	// No lease name a user can give is a slot's, and no malformed suffix
	// parses as one.
	for _, s := range []string{"job~0", "job~01", "job~-1", "job~x", "job~", "job~100", "~1", "a~b~1x"} {
		if _, _, ok := lease.ParseSlotName(s); ok && s != "~1" {
			t.Errorf("ParseSlotName(%q) parsed", s)
		}
		if err := lease.ValidateStoreName(s); err == nil {
			t.Errorf("ValidateStoreName(%q) accepted", s)
		}
		if err := lease.ValidateName(s); err == nil {
			t.Errorf("ValidateName(%q) accepted a name with '~'", s)
		}
	}
}

func TestSlotHolder(t *testing.T) {
	h := lease.SlotHolder(lease.Holder{Label: lease.SlotLabel("web-1:42", 2, 3), Token: 7})
	if h.Label != "web-1:42" || h.Slot != 2 || h.Slots != 3 || h.Token != 7 {
		t.Fatalf("SlotHolder = %+v", h)
	}
	// Labels that only look like it stay as they are.
	for _, l := range []string{"web-1:42", "x (slot 3 of 3)", "x (slot 0 of 1)", "x (slot 1 of 02)", "x (slot a of 3)", "(slot 1 of 3", "x (slot 0 of 101)"} {
		if h := lease.SlotHolder(lease.Holder{Label: l}); h.Label != l || h.Slots != 0 {
			t.Errorf("SlotHolder(%q) = %+v; want it unchanged", l, h)
		}
	}
	if h := lease.SlotHolder(lease.Holder{Label: lease.SlotLabel("", 0, 2)}); h.Label != "" || h.Slots != 2 {
		t.Errorf("an empty label with a slot: %+v", h)
	}
}
