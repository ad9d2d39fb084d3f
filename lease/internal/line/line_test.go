package line

import (
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// A newcomer stands at the back until a listing places it; a listing at
// the front closes the channel its Wait sleeps on, and so does leaving.
func TestPlaces(t *testing.T) {
	timing := lease.CandidateTiming{Heartbeat: true, PerSecond: 3, MinInterval: 5 * time.Second, Step: 400 * time.Millisecond}
	p := New(3)
	if p.Behind("n") != nil || p.AtFront("n") {
		t.Fatal("a lease never joined has a place")
	}
	me := lease.Candidate{ID: "me", Since: time.Unix(10, 0)}
	if p.Joined("n", me, 5) {
		t.Fatal("the fifth to join is at the front")
	}
	wake := p.Behind("n")
	if wake == nil || p.AtFront("n") {
		t.Fatal("the fifth to join is not behind the front")
	}
	before := func(n int) []lease.Candidate {
		var cs []lease.Candidate
		for i := range n {
			cs = append(cs, lease.Candidate{ID: string(rune('a' + i)), Since: time.Unix(int64(i), 0)})
		}
		return append(cs, me)
	}
	if mine, front := p.Listed("n", before(3), timing); !mine || front {
		t.Fatalf("fourth in line: mine %v, front %v", mine, front)
	}
	select {
	case <-wake:
		t.Fatal("woken while still behind the front")
	default:
	}
	// A registration no heartbeat could have asked for does not count.
	far := before(3)
	far[0].Remaining = 24 * time.Hour
	if mine, front := p.Listed("n", far, timing); !mine || !front {
		t.Fatalf("third in line, behind a far-future registration: mine %v, front %v", mine, front)
	}
	select {
	case <-wake:
	default:
		t.Fatal("placed at the front, its Wait was not woken")
	}
	if p.Behind("n") != nil || !p.AtFront("n") {
		t.Fatal("at the front, yet behind")
	}
	p.Place("n", 4)
	wake = p.Behind("n")
	p.Left("n", "other")
	if p.Behind("n") == nil {
		t.Fatal("another registration's leaving forgot this one's place")
	}
	p.Left("n", "me")
	select {
	case <-wake:
	default:
		t.Fatal("leaving did not wake the Wait")
	}
	if mine, _ := p.Listed("n", before(0), timing); mine {
		t.Fatal("a listing after leaving placed a registration that is gone")
	}
}
