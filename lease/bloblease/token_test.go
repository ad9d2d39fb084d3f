package bloblease

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// mint acquires and releases name once and returns the token.
func mint(t *testing.T, s *Store, name string) uint64 {
	t.Helper()
	l, err := s.TryAcquire(context.Background(), req15(name, "m"))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	return l.Info().Token
}

// TestTokensSurviveDataLoss: the fencing token never goes back, even when
// the counter is lost: the blob deleted (and the name taken again in the
// same second), the container deleted, and Azurite (in memory only)
// restarted empty.
func TestTokensSurviveDataLoss(t *testing.T) {
	t.Parallel()
	ep, pid := privateAzurite(t)
	cont := freshContainer()
	s := openAzurite(t, ep, cont, Options{})
	const name = "loss"
	var highest uint64
	record := func(stage string, tok uint64) {
		t.Helper()
		if tok <= highest {
			t.Fatalf("%s: token %d is not greater than the highest earlier token %d", stage, tok, highest)
		}
		if tok > maxToken {
			t.Fatalf("%s: token %d is not below 2^53", stage, tok)
		}
		highest = tok
	}
	for range 3 {
		record("first use", mint(t, s, name))
	}
	for i := range 2 {
		if _, err := s.blob(name).Delete(context.Background(), nil); err != nil {
			t.Fatalf("delete the blob: %v", err)
		}
		record("after deleting the blob "+strconv.Itoa(i), mint(t, s, name))
	}
	// A short call deadline leaves no time to wait for the next second.
	if _, err := s.blob(name).Delete(context.Background(), nil); err != nil {
		t.Fatalf("delete the blob: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), nextSecondBudget-100*time.Millisecond)
	l, err := s.TryAcquire(ctx, req15(name, "m"))
	cancel()
	if err != nil {
		t.Fatalf("TryAcquire with a short deadline: %v", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	record("after deleting the blob, short deadline", l.Info().Token)
	if _, err := s.cc.Delete(context.Background(), nil); err != nil {
		t.Fatalf("delete the container: %v", err)
	}
	// Azure refuses a container name for a while after its deletion: use
	// another container on the same account (the same blob, lost).
	s2 := openAzurite(t, ep, freshContainer(), Options{})
	record("in a new container", mint(t, s2, name))

	// Restart: Azurite keeps nothing on disk, so a new instance is the old
	// one after a restart.
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	ep2, _ := privateAzurite(t)
	s3 := openAzurite(t, ep2, cont, Options{})
	record("after the restart", mint(t, s3, name))
	record("after the restart, again", mint(t, s3, name))
	t.Logf("highest token %d", highest)
}

// TestTokensNear2p53: tokens up to 2^53−1 are written and read back exactly;
// a counter at or above 2^53, or not a number, is refused as corrupt instead
// of wrapping.
func TestTokensNear2p53(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	s := openAzurite(t, ep, freshContainer(), Options{})
	setCounter := func(t *testing.T, name, v string) {
		t.Helper()
		mint(t, s, name) // creates the blob
		if _, err := s.blob(name).SetMetadata(context.Background(), map[string]*string{metaToken: to(v)}, nil); err != nil {
			t.Fatalf("SetMetadata: %v", err)
		}
	}
	// A counter further ahead of Azure's clock than lease.MaxClockSkew
	// (years, up to 2^53−2) is refused with ErrTokenAhead, and the lease
	// released with the counter unchanged; one within it is followed.
	for _, prev := range []uint64{uint64(time.Now().Add(lease.MaxClockSkew + time.Minute).UnixMicro()), 1999999999999999, maxToken - 2, maxToken - 1} {
		t.Run("ahead"+strconv.FormatUint(prev, 10), func(t *testing.T) {
			name := "ahead-" + lease.NewID()[:8]
			setCounter(t, name, strconv.FormatUint(prev, 10))
			_, err := s.TryAcquire(context.Background(), req15(name, "a"))
			if !errors.Is(err, lease.ErrTokenAhead) || !errors.Is(err, lease.ErrConfig) || strings.Contains(err.Error(), "\n") {
				t.Fatalf("TryAcquire with the counter ahead: %v; want one line, ErrTokenAhead", err)
			}
			if h, err := s.Status(context.Background(), name); err != nil || h != nil {
				t.Fatalf("Status after the refusal = %+v, %v; want free", h, err)
			}
			props, err := s.blob(name).GetProperties(context.Background(), nil)
			if v, _ := metaGet(props.Metadata, metaToken); err != nil || v != strconv.FormatUint(prev, 10) {
				t.Fatalf("counter now %q, %v; want it unchanged", v, err)
			}
		})
	}
	for _, prev := range []uint64{uint64(time.Now().Add(lease.MaxClockSkew - time.Minute).UnixMicro())} {
		t.Run(strconv.FormatUint(prev, 10), func(t *testing.T) {
			name := "big-" + lease.NewID()[:8]
			setCounter(t, name, strconv.FormatUint(prev, 10))
			l, err := s.TryAcquire(context.Background(), req15(name, "big:1"))
			if err != nil {
				t.Fatalf("TryAcquire: %v", err)
			}
			defer l.Release(context.Background())
			if got := l.Info().Token; got != prev+1 {
				t.Fatalf("token %d; want %d", got, prev+1)
			}
			leasetest.CheckGranted(t, l.Info(), 30*time.Second)
			h, err := s.Status(context.Background(), name)
			if err != nil || h == nil || h.Label != "big:1" || h.Token != prev+1 {
				t.Fatalf("Status = %+v, %v; want holder big:1 token %d", h, err, prev+1)
			}
			_, err = s.TryAcquire(context.Background(), req15(name, "other"))
			var he *lease.HeldError
			if !errors.As(err, &he) || he.By.Label != "big:1" || he.By.Token != prev+1 {
				t.Fatalf("second TryAcquire: %v; want held by big:1 with token %d", err, prev+1)
			}
		})
	}
	for _, bad := range []string{strconv.FormatUint(maxToken, 10), "9007199254740992", "18446744073709551615", "-5", "12abc", "1e15"} {
		t.Run("corrupt"+bad, func(t *testing.T) {
			name := "corrupt-" + lease.NewID()[:8]
			setCounter(t, name, bad)
			l, err := s.TryAcquire(context.Background(), req15(name, "c"))
			if err == nil {
				_ = l.Release(context.Background())
				t.Fatalf("TryAcquire with counter %s gave token %d; want an error", bad, l.Info().Token)
			}
			if errors.Is(err, lease.ErrUnavailable) || errors.Is(err, lease.ErrHeld) || !strings.Contains(err.Error(), "fencing counter") {
				t.Fatalf("TryAcquire: %v; want a corrupt-counter error", err)
			}
			// Refused and released: the lease is free, the counter unchanged.
			if h, err := s.Status(context.Background(), name); err != nil || h != nil {
				t.Fatalf("Status after the refusal = %+v, %v; want free", h, err)
			}
			props, err := s.blob(name).GetProperties(context.Background(), nil)
			if v, _ := metaGet(props.Metadata, metaToken); err != nil || v != bad {
				t.Fatalf("counter now %q, %v; want %q unchanged", v, err, bad)
			}
		})
	}
}
