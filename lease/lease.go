package lease

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// OpenOptions is what every network store's Open takes besides its URL
// (each store's Options is this type, and its doc says what the fields mean
// there). The zero value is usable.
type OpenOptions struct {
	// CallTimeout bounds one store call; zero means the store's
	// DefaultCallTimeout.
	CallTimeout time.Duration
	// Getenv reads credentials from the environment; nil means os.Getenv.
	Getenv func(string) string
	// Log receives debug lines, never secrets; nil discards them.
	Log *slog.Logger
}

// Sentinel errors: the kinds of error callers classify with errors.Is.
//
// Errors in leaderrun are written once, for people, and classified by type,
// never by text. A store returns an *Error: a sentence that is the sentinel
// it stands for without saying so ("Redis at 127.0.0.1:6379 is unreachable:
// connection refused" is ErrUnavailable). Code elsewhere may wrap a sentinel
// at the front ("%w: detail"), so the sentinels' own texts are words for
// users, without a package prefix. Either way, err.Error() is what a user
// reads, unchanged.
var (
	// ErrHeld means the lease is held by someone else. The concrete error is a *HeldError.
	ErrHeld = errors.New("held by another holder")
	// ErrLost means the store answered that our lease is gone or owned by another:
	// the holder must stop at once. Also the cause of a Keeper's context when the
	// local deadline passed without a confirmed renewal.
	ErrLost = errors.New("lost")
	// ErrNotHeld means a release or renew named a lease this caller does not hold.
	ErrNotHeld = errors.New("not held by this holder")
	// ErrUnavailable marks a transient store failure (network, timeout, store
	// restarting): the operation may succeed if retried.
	ErrUnavailable = errors.New("store unavailable")
	// ErrConfig marks a problem with the store address, credentials or options
	// that retrying cannot fix.
	ErrConfig = errors.New("bad store configuration")
	// ErrUnsafeTiming is wrapped by Timing.Validate when the flags cannot be
	// honoured safely.
	ErrUnsafeTiming = errors.New("unsafe timing")
	// ErrBadName is returned for a lease name outside the allowed alphabet or length.
	ErrBadName = errors.New("bad name")
)

// Holder describes one acquisition of a lease, as the store records it.
type Holder struct {
	// Name is the lease name.
	Name string `json:"name"`
	// Label is the human label of the instance (default hostname:pid). It is
	// informational; uniqueness comes from ID.
	Label string `json:"holder"`
	// ID is the random 128-bit token of this acquisition (hex). Renew and
	// release succeed only while the store still holds this ID.
	ID string `json:"id,omitempty"`
	// Token is the fencing token: strictly increasing per lease name across
	// acquisitions.
	Token uint64 `json:"token"`
	// Since is the wall-clock time of the acquisition, for display only; no
	// safety decision ever reads it.
	Since time.Time `json:"since"`
	// TTL is the lease duration the store grants; 0 means the lease does not
	// expire on its own (file store: it ends when the holder's process does).
	TTL time.Duration `json:"ttl_ns,omitempty"`
	// Remaining is the time left before the store expires the lease, when the
	// store can tell (Status only); 0 means unknown or not applicable.
	Remaining time.Duration `json:"remaining_ns,omitempty"`
	// HeldUntil, when not zero, says the holder has finished and released
	// the lease with a hold (ReleaseHeld): it stays taken until then, by
	// the wall clock, and nobody renews it.
	HeldUntil time.Time `json:"held_until,omitzero"`
	// Slot is the slot this holder holds, 0-based, and Slots the number of
	// slots of the lease it was taken with (Request.Slots); Slots is 0 for
	// a lease taken without slots. The store records neither field: the
	// label carries them (see SlotHolder).
	Slot  int `json:"slot,omitempty"`
	Slots int `json:"slots,omitempty"`
	// Granted is the store's clock when it granted this acquisition, on a
	// store whose tokens count its clock (ClockTokens), as TryAcquire
	// returns it; zero on the other stores and in what Status reads.
	// --once-per decides the period from it: the token tells the same only
	// while the fencing counter is not ahead of the clock, and it may be,
	// by up to MaxClockSkew (written ahead, or a clock that stepped back).
	Granted time.Time `json:"granted,omitzero"`
}

// HeldError is returned by Store.TryAcquire when another holder has the lease.
type HeldError struct {
	// By is the current holder as far as the store could tell; fields may be
	// zero when the store cannot read them.
	By Holder
}

// Error describes the holder.
func (e *HeldError) Error() string {
	if e.By.Label == "" {
		return fmt.Sprintf("lease %s is held by another holder", e.By.Name)
	}
	s := fmt.Sprintf("lease %s is held by %s", e.By.Name, e.By.Label)
	if e.By.Slots > 1 {
		s = fmt.Sprintf("all %d slots of lease %s are held (slot %d by %s", e.By.Slots, e.By.Name, e.By.Slot, e.By.Label)
	}
	if !e.By.Since.IsZero() {
		s += " since " + e.By.Since.Local().Format("15:04:05")
	}
	if e.By.Token != 0 {
		s += fmt.Sprintf(" (token %d)", e.By.Token)
	}
	if e.By.Slots > 1 {
		s += ")"
	}
	return s
}

// Is reports that a HeldError is ErrHeld.
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Request names what TryAcquire should take.
type Request struct {
	// Name is the lease name (see ValidateName).
	Name string
	// Label is the human label recorded with the lease.
	Label string
	// ID is the random acquisition token (NewID). A caller reuses the same ID
	// when it retries one attempt whose answer was lost, so a store that
	// already granted it can say yes again instead of locking us out.
	ID string
	// TTL is the lease duration to ask for; ignored by stores whose leases do
	// not expire.
	TTL time.Duration
	// Slots, when above 1, makes the lease a semaphore of that many slots
	// (at most MaxSlots): Acquire takes the first free one, each a lease of
	// its own under SlotName, and all contenders must give the same
	// number. A store sees it on the request of each slot: its tokens then
	// come from one counter per lease name, shared by the slots. 0 or 1
	// is a plain lease.
	Slots int
}

// Limits describes a store's timing properties, used by Timing.Validate.
type Limits struct {
	// Expires is false for stores whose leases end only when the holder's
	// process does (the file store): no deadline applies.
	Expires bool
	// Epsilon is the store's granularity margin ε (Redis: a few ms; Azure: 1s).
	Epsilon time.Duration
	// MinTTL and MaxTTL bound the TTL the store accepts; zero means no bound.
	MinTTL, MaxTTL time.Duration
	// TTLUnit, when non-zero, is the unit every TTL must be a whole multiple of.
	TTLUnit time.Duration
}

// Store is a place where named leases live. Implementations are safe for
// concurrent use. Every store keeps a run history (History) and a list of
// standbys (CandidateRegistry); the capabilities only some stores have are
// interfaces of their own, looked up with a type assertion on the Store
// (ChangeWatcher, ClockTokens, MultiWaiter) or with As on a Lease
// (EndingRelease).
//
// Every lease name a Store method, or a method of the capabilities below
// (Candidates, History, Changes), is given has passed ValidateName: callers
// check a name once, where it enters (Acquire does; leaderrun's commands do
// when they read NAME), and a network store does not check it again. The
// file store does, because there a name becomes a path.
type Store interface {
	// TryAcquire makes one attempt to take the lease, without waiting. It
	// returns a *HeldError (errors.Is ErrHeld) when someone else holds it,
	// an error wrapping ErrUnavailable for transient failures, and any other
	// error for failures retrying cannot fix.
	TryAcquire(ctx context.Context, req Request) (Lease, error)
	// Wait blocks until the lease named name may have become free, ctx is
	// done, or a store-chosen interval has passed; it returns nil to mean
	// "try again" and ctx's error when ctx is done. held is what the last
	// TryAcquire reported. Wait never acquires anything itself.
	Wait(ctx context.Context, name string, held *HeldError) error
	// Status returns the current holder, or nil when the lease is free.
	Status(ctx context.Context, name string) (*Holder, error)
	// Limits returns the store's timing properties.
	Limits() Limits
	// Close releases the store's connections. Leases obtained from it must
	// not be used afterwards.
	Close() error
	History
	CandidateRegistry
}

// Lease is one acquisition of a named lease. Methods are safe for
// concurrent use. Every lease can be released with a hold (Holding). A
// lease that wraps another (a slot's) has an Unwrap method, through which
// As finds the optional capabilities of the lease it wraps.
type Lease interface {
	// Info returns the record written at acquisition (Token is the fencing token).
	Info() Holder
	// Renew extends the lease by its TTL, counted by the store from no
	// earlier than the moment the request was sent. It returns an error
	// wrapping ErrLost when the store says the lease is gone or owned by
	// another (never re-creating it), and any other error when the outcome
	// is unknown: the caller must then assume no extension.
	Renew(ctx context.Context) error
	// Release gives the lease up if the store still holds our ID. It returns
	// an error wrapping ErrNotHeld (or ErrLost) when it does not.
	Release(ctx context.Context) error
	Holding
}

// NewID returns a fresh random 128-bit acquisition token, hex encoded.
func NewID() string {
	var b [16]byte
	Random(b[:])
	return hex.EncodeToString(b[:])
}

// Random fills b from the kernel's random number generator, as crypto/rand
// does on Linux, without linking crypto/rand: its packages' initialisers
// ran at every start of every run, for one call of 16 bytes. It reads
// getrandom(2), or /dev/urandom where that is missing (Linux before 3.17,
// or a seccomp filter that refuses it).
func Random(b []byte) {
	for len(b) > 0 {
		n, err := unix.Getrandom(b, 0)
		switch {
		case err == nil:
			b = b[n:]
		case errors.Is(err, unix.EINTR):
			// a signal before the pool was ready, early at boot
		case errors.Is(err, unix.ENOSYS), errors.Is(err, unix.EPERM):
			urandom(b)
			return
		default:
			panic("lease: getrandom failed: " + err.Error())
		}
	}
}

// urandom fills b from /dev/urandom.
func urandom(b []byte) {
	f, err := os.Open("/dev/urandom")
	if err == nil {
		defer f.Close()
		_, err = io.ReadFull(f, b)
	}
	if err != nil {
		panic("lease: no random source: " + err.Error())
	}
}

// ValidateName checks a lease name: letters, digits, '.', '_', '-', '/';
// 1 to 200 bytes; not "." or ".." and no empty or dot-only path element.
func ValidateName(name string) error {
	if !validNameBytes(name) {
		if len(name) > maxShownName {
			// Not the whole of it: one line, whatever was passed.
			return fmt.Errorf("%w of %d bytes, starting %q: use 1-200 letters, digits, '.', '_', '-' or '/'", ErrBadName, len(name), name[:maxShownName])
		}
		return fmt.Errorf("%w %q: use 1-200 letters, digits, '.', '_', '-' or '/'", ErrBadName, name)
	}
	for _, part := range splitSlash(name) {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("%w %q: empty, '.' or '..' path element", ErrBadName, name)
		}
	}
	return nil
}

// maxShownName is how much of a bad name an error quotes.
const maxShownName = 40

// validNameBytes checks length and alphabet. (A regexp with {1,200} costs
// most of a millisecond to compile at start-up, on every run.)
func validNameBytes(name string) bool {
	if len(name) < 1 || len(name) > 200 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-' || c == '/') {
			return false
		}
	}
	return true
}

func splitSlash(s string) []string {
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// Error is an error written for people and for errors.Is at once: its text
// is Msg alone (one sentence, no chain of package prefixes), and it is each
// of Kinds (lease sentinels, context errors, the cause) for errors.Is and
// errors.As. Stores return it so that a vendor's error stays inside the
// store while the user reads a sentence and the caller classifies.
type Error struct {
	Msg   string
	Kinds []error
}

// Error returns Msg.
func (e *Error) Error() string { return e.Msg }

// Unwrap returns Kinds.
func (e *Error) Unwrap() []error { return e.Kinds }

// NewError returns an *Error with message msg that is each non-nil kind.
func NewError(msg string, kinds ...error) error {
	e := &Error{Msg: msg}
	for _, k := range kinds {
		if k != nil {
			e.Kinds = append(e.Kinds, k)
		}
	}
	return e
}
