package etcdlease_test

import (
	"bufio"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/etcdlease"
)

// TestHeldAttemptWritesNothing: an attempt on a lease another holds asks
// for no etcd lease (a grant and its revoke are Raft writes; a crowd of
// standbys tries at every holder change), read from the server's own
// counters; it still reports the holder.
func TestHeldAttemptWritesNothing(t *testing.T) {
	t.Parallel()
	url := private(t, "single")["LEADERRUN_TEST_ETCD_URL"]
	a := open(t, url, etcdlease.Options{CallTimeout: time.Second})
	b := open(t, url, etcdlease.Options{CallTimeout: time.Second})
	l, err := a.TryAcquire(ctxT(t), req("held", "a", 5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Release(ctxT(t)) }()
	before := grants(t, url)
	for range 3 {
		_, err = b.TryAcquire(ctxT(t), req("held", "b", 5*time.Second))
		var he *lease.HeldError
		if !errors.As(err, &he) || he.By.Label != "a" || he.By.Token != l.Info().Token {
			t.Fatalf("TryAcquire: %v; want HeldError naming a with token %d", err, l.Info().Token)
		}
	}
	if after := grants(t, url); after != before {
		t.Fatalf("3 attempts on a held lease made %v lease grants; want none", after-before)
	}
}

// grants reads how many LeaseGrant calls the server has taken.
func grants(t *testing.T, url string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + strings.TrimPrefix(url, "etcd://") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "grpc_server_started_total{") && strings.Contains(line, `grpc_method="LeaseGrant"`) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatal(err)
			}
			return v
		}
	}
	t.Fatal("no LeaseGrant counter in the server's metrics")
	return 0
}
