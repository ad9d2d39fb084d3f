package filelease

import (
	"fmt"
	"runtime"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// MaxToken is the largest fencing token the store mints: 2^53 − 1, the
// largest integer a JSON reader using float64 numbers reads exactly. A
// counter at or above 2^53 in a lock file is refused as corrupt.
const MaxToken = 1<<53 - 1

// maxAhead bounds how long mint waits for the clock to catch up with the
// counter. The counter runs ahead of the clock only when acquisitions come
// faster than one per microsecond (by microseconds), or when the clock
// stepped back or the file was edited (by more than this; waiting would not
// help, and the counter alone keeps tokens increasing).
const maxAhead = 10 * time.Millisecond

// mint returns the token of an acquisition whose lock file holds counter
// prev: max(prev+1, the wall clock in microseconds). It returns only once
// the clock has passed the token (when the token is not far ahead of it), so
// that the record carrying it is written after that instant: a lock file
// created later (because this one was deleted or truncated) starts from a
// larger clock reading, and tokens never go back as long as the clock does
// not step back.
func mint(prev uint64, now func() time.Time, path string) (uint64, error) {
	if prev >= MaxToken {
		// A valid counter (at most MaxToken, checked when it was read)
		// that has issued the last token there is.
		return 0, newError(lease.ErrConfig, nil, fmt.Sprintf(
			"lock file %s: its fencing counter %d has reached 2^53−1, the largest token (tokens stay below 2^53 so that JSON readers hold them exactly); no further token can be issued from it", path, prev))
	}
	tok := prev + 1
	if us := now().UnixMicro(); us > 0 && uint64(us) > tok {
		tok = uint64(us)
	}
	if tok > MaxToken {
		return 0, newError(lease.ErrConfig, nil, fmt.Sprintf("the clock (%s) is past what fencing tokens can count", now().UTC().Format(time.RFC3339)))
	}
	for {
		us := now().UnixMicro()
		if us > int64(tok) || time.Duration(int64(tok)-us)*time.Microsecond > maxAhead {
			return tok, nil
		}
		if d := time.Duration(int64(tok)-us) * time.Microsecond; d > 50*time.Microsecond {
			time.Sleep(d)
		} else {
			runtime.Gosched()
		}
	}
}
