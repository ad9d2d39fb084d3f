package runner_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/leaderrun/leaderrun/runner"
)

// A MayStart that refuses keeps the child from starting, and Run returns
// its error; one that agrees is asked once, right before the start.
func TestMayStart(t *testing.T) {
	t.Parallel()
	errLate := errors.New("the stop point passed")
	marker := filepath.Join(t.TempDir(), "ran")
	res, err := runner.Run(context.Background(), runner.Config{
		Args:     []string{"touch", marker},
		MayStart: func() error { return errLate },
	})
	if !errors.Is(err, errLate) || res.PID != 0 {
		t.Fatalf("Run = %+v, %v; want no PID and an error wrapping %v", res, err, errLate)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the child ran (stat: %v)", err)
	}
	asked := 0
	res, err = runner.Run(context.Background(), runner.Config{
		Args:     []string{"touch", marker},
		MayStart: func() error { asked++; return nil },
	})
	if err != nil || res.Code != 0 || asked != 1 {
		t.Fatalf("Run = %+v, %v, asked %d times; want exit 0, asked once", res, err, asked)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the child did not run: %v", err)
	}
}
