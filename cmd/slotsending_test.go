package cmd

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/etcdlease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// TestSlotsRunReleasesWithItsEnd: a --slots run on etcd gives its slot up
// with the run's end record in one write (lease.EndingRelease, found
// through the slot's wrapper): the revision that deletes the slot's key
// also writes the ended run to the history (without lease.As, they are two
// revisions). The store's own revisions are read back with a watch from
// before the run, so the count does not depend on when the background
// start record lands. Slot 0 is held by the test, with a TTL no run
// outlasts, so the run takes slot 1, whose key is not the lease's name.
func TestSlotsRunReleasesWithItsEnd(t *testing.T) {
	if _, err := exec.LookPath("etcd"); err != nil && os.Getenv("CI") == "" {
		t.Skip("etcd not installed")
	}
	url := leasetest.StartServer(t, t.TempDir(), "../scripts/etcd.sh", "single")["LEADERRUN_TEST_ETCD_URL"]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := etcdlease.Open(ctx, url, etcdlease.Options{CallTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// The store first: its Open sets gRPC's logger, which a client made
	// before it would read while it is set.
	raw, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(strings.TrimPrefix(url, "etcd://"), ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	name := "slots-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	a, err := lease.Acquire(ctx, s, lease.Request{Name: name, Label: "slot-0", TTL: time.Hour, Slots: 2}, lease.AcquireOptions{Wait: 0})
	if err != nil {
		t.Fatalf("Acquire(slot 0): %v", err)
	}
	if a.Lease.Info().Slot != 0 {
		t.Fatalf("the test took slot %d; want 0", a.Lease.Info().Slot)
	}
	gr, err := raw.Get(ctx, "revision")
	if err != nil {
		t.Fatal(err)
	}
	before := gr.Header.Revision
	if code, _, errOut := runCapture(t, "--store", url, "--ttl", "15s", "--name", name, "--slots", "2", "--", "true"); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if gr, err = raw.Get(ctx, "revision"); err != nil {
		t.Fatal(err)
	}
	after := gr.Header.Revision
	slotKey := etcdlease.DefaultPrefix + lease.SlotName(name, 1)
	runKeys := etcdlease.DefaultPrefix + name + ":runs/"
	released, seen := int64(0), before
	ended := map[int64]bool{} // revisions that wrote an ended run
	for wr := range raw.Watch(ctx, etcdlease.DefaultPrefix, clientv3.WithPrefix(), clientv3.WithRev(before+1)) {
		if err := wr.Err(); err != nil {
			t.Fatal(err)
		}
		for _, ev := range wr.Events {
			seen = max(seen, ev.Kv.ModRevision)
			key := string(ev.Kv.Key)
			switch {
			case key == slotKey && ev.Type == clientv3.EventTypeDelete:
				released = ev.Kv.ModRevision
			case strings.HasPrefix(key, runKeys) && ev.Type == clientv3.EventTypePut:
				var r lease.Run
				if json.Unmarshal(ev.Kv.Value, &r) == nil && r.Ended() {
					ended[ev.Kv.ModRevision] = true
				}
			}
		}
		if seen >= after { // every write of the run (all under the prefix) read
			break
		}
	}
	if released == 0 || len(ended) == 0 {
		t.Fatalf("revisions %d to %d: the slot's key deleted at %d, ended runs written at %v; want both", before+1, after, released, ended)
	}
	if !ended[released] {
		t.Errorf("the slot's key was deleted at revision %d, the ended run written at %v: two writes; want one (the release carrying the end)", released, ended)
	}
}
