package run

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/runner"
)

// A guard trusted to be of this build lets the child start before its
// handshake; should it then die, or stay silent, before the handshake, the
// run's context ends with the guard's cause (the run stops, exit 124).
func TestUnverifiedGuardStopsRun(t *testing.T) {
	for name, tc := range map[string]struct {
		body      string
		handshake bool
	}{
		"dies":   {"exit 0", false},
		"silent": {"exec sleep 300", true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fake := filepath.Join(t.TempDir(), "fakeguard")
			if err := os.WriteFile(fake, []byte("#!/bin/sh\n"+tc.body+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			g, err := runner.StartTrustedGuardProgram(fake)
			for tries := 0; errors.Is(err, syscall.ETXTBSY) && tries < 50; tries++ {
				// A parallel test forked while fake's write descriptor was
				// open, and its child holds it until its exec (Go issue
				// 22315): retry, as os/exec's own tests do.
				time.Sleep(10 * time.Millisecond)
				g, err = runner.StartTrustedGuardProgram(fake)
			}
			if err != nil {
				t.Fatal(err)
			}
			p := &protection{guard: g}
			p.verifyAsync(200 * time.Millisecond)
			ctx, stop := p.watch(context.Background())
			<-ctx.Done()
			stop()
			p.finish(true, slog.New(slog.DiscardHandler))
			var gc guardCause
			cause := context.Cause(ctx)
			if !errors.As(cause, &gc) || !errors.Is(cause, runner.ErrGuardDied) || gc.handshake != tc.handshake {
				t.Fatalf("cause %v; want the guard's (handshake %v)", cause, tc.handshake)
			}
			if tc.handshake && !strings.Contains(cause.Error(), "handshake within 200ms") {
				t.Errorf("cause %q does not say the handshake did not come", cause)
			}
		})
	}
}
