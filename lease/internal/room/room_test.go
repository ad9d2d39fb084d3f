package room

import (
	"errors"
	"testing"
	"time"
)

// TestPressure: the pause doubles from 5 s up to 60 s, each wait between
// half of it and all of it, and starts again after Reset.
func TestPressure(t *testing.T) {
	var p Pressure
	for i, want := range []time.Duration{5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 60 * time.Second, 60 * time.Second} {
		if d := p.Next(); d < want/2 || d > want {
			t.Fatalf("pause %d: %v; want between %v and %v", i, d, want/2, want)
		}
	}
	p.Reset()
	if d := p.Next(); d > 5*time.Second {
		t.Fatalf("after Reset: %v; want 5s at most", d)
	}
}

// TestHeadroom: a quarter of the limit, 3 at least; half of that (1 at
// least) for a connection that stays.
func TestHeadroom(t *testing.T) {
	want := map[int64][2]int64{0: {3, 1}, 8: {3, 1}, 20: {5, 2}, 100: {25, 12}} // limit: new, staying
	for limit, w := range want {
		if got := [2]int64{Headroom(limit, false), Headroom(limit, true)}; got != w {
			t.Errorf("Headroom(%d, false/true) = %v; want %v", limit, got, w)
		}
	}
}

// TestCheck: every limit is checked, a negative one is none, 0 allows no
// connection, and the error says how many are free.
func TestCheck(t *testing.T) {
	noRoom := errors.New("no room")
	check := func(extra int64, staying bool, limits []Limit, want string) {
		t.Helper()
		err := Check(noRoom, extra, staying, limits...)
		switch {
		case want == "" && err != nil:
			t.Errorf("Check(%d, %v, %v): %v; want room", extra, staying, limits, err)
		case want != "" && (!errors.Is(err, noRoom) || err.Error() != "no room ("+want+")"):
			t.Errorf("Check(%d, %v, %v): %v; want no room (%s)", extra, staying, limits, err, want)
		}
	}
	check(1, false, []Limit{{20, 14}, {-1, 500}}, "")
	check(1, false, []Limit{{20, 14}, {10, 8}}, "1 of 10 free, want 3")
	check(0, true, []Limit{{20, 18}}, "")
	check(0, false, []Limit{{0, 0}}, "0 of 0 free, want 3")
	check(2, false, []Limit{{4, 5}}, "0 of 4 free, want 3")
}
