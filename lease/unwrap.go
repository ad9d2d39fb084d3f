package lease

// As finds, in l or in the leases it wraps, the first that is a T: an
// optional capability of a lease (EndingRelease, a file lease's LockFile
// or Lost). A wrapper (a slot's lease) has an Unwrap method returning the
// lease it wraps, so that it passes on every capability of that lease
// without a method for each, as errors.As walks Unwrap and net/http's
// ResponseController finds a wrapped writer's capabilities.
//
// A wrapper that changes what a capability means (an Info of its own) has
// that method itself: As returns the wrapper first when it is a T.
func As[T any](l Lease) (T, bool) {
	for l != nil {
		if t, ok := l.(T); ok {
			return t, true
		}
		u, ok := l.(interface{ Unwrap() Lease })
		if !ok {
			break
		}
		l = u.Unwrap()
	}
	var zero T
	return zero, false
}
