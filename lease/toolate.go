package lease

import (
	"context"
	"errors"
)

// WaitAgain reports whether a lease that Acquire granted but Keep refused
// with err should be let go and waited for again, rather than the run given
// up: it was granted too late to be kept (ErrNoRunway: the answer took most
// of the TTL), or its first renewal went unanswered (ErrUnavailable, or the
// call's deadline: the store froze just after granting it). A standby does
// not give up on a transient fault. The caller releases the lease (Keep left
// it taken), undoes what it set up for it, and calls Acquire again while its
// wait allows; any other error from Keep ends the attempt.
func WaitAgain(err error) bool {
	return errors.Is(err, ErrNoRunway) || errors.Is(err, ErrUnavailable) ||
		errors.Is(err, context.DeadlineExceeded)
}
