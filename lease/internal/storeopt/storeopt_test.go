package storeopt

import (
	"log/slog"
	"os"
	"reflect"
	"testing"
	"time"
)

func TestDefaults(t *testing.T) {
	ct, getenv, log := Defaults(0, 2*time.Second, nil, nil)
	if ct != 2*time.Second || reflect.ValueOf(getenv).Pointer() != reflect.ValueOf(os.Getenv).Pointer() || log == nil {
		t.Errorf("zero options: %v %p %v", ct, getenv, log)
	}
	mine := slog.Default()
	env := func(string) string { return "x" }
	ct, getenv, log = Defaults(time.Second, 2*time.Second, env, mine)
	if ct != time.Second || getenv("") != "x" || log != mine {
		t.Errorf("given options were replaced: %v %v", ct, log)
	}
}

func TestMillisRoundsUp(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int64
	}{
		{time.Second, 1000},
		{time.Second + time.Nanosecond, 1001},
		{time.Microsecond, 1},
		{0, 0},
	} {
		if got := Millis(tc.d); got != tc.want {
			t.Errorf("Millis(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}
