package lease_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

// A name too long to use is not echoed in full: the error stays one short
// line whatever was passed (a 5,000-byte name was quoted whole).
func TestValidateNameLongNameNotEchoed(t *testing.T) {
	name := strings.Repeat("x", 5000)
	err := lease.ValidateName(name)
	if !errors.Is(err, lease.ErrBadName) {
		t.Fatalf("ValidateName(5000 bytes) = %v; want ErrBadName", err)
	}
	if msg := err.Error(); len(msg) > 200 || !strings.Contains(msg, "5000 bytes") {
		t.Errorf("error %q (%d bytes): want a short line that gives the length", msg, len(msg))
	}
	if err := lease.ValidateName("bad name"); err == nil || !strings.Contains(err.Error(), `"bad name"`) {
		t.Errorf("a short bad name is quoted whole: %v", err)
	}
}
