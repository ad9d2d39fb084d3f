package filelease

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// record is the lock file's content.
type record struct {
	Name    string    `json:"name"`
	Holder  string    `json:"holder,omitempty"`
	ID      string    `json:"id,omitempty"`
	Token   uint64    `json:"token"`
	Since   time.Time `json:"since,omitzero"`
	PID     int       `json:"pid,omitempty"`
	Held    bool      `json:"held"`
	Updated time.Time `json:"updated,omitzero"`
	// OFD says the holder also holds an OFD read lock on the file, which
	// probes test with F_OFD_GETLK without taking any lock. Records of
	// older versions lack it and are probed with a shared flock.
	OFD bool `json:"ofd,omitempty"`
	// HeldUntil, on a record that is not Held, is the end of the hold its
	// last holder released it with (ReleaseHeld): acquirers treat the lease
	// as taken until then, by the wall clock. Holder, Token and Since stay
	// the last holder's, for status.
	HeldUntil time.Time `json:"held_until,omitzero"`
}

// readRecord reads the record at the start of f; a missing or empty record
// reads as the zero record. A torn or unreadable record, or a counter at or
// above 2^53, is an error wrapping lease.ErrConfig: the file is corrupt.
func readRecord(f *os.File) (record, error) {
	// Readers that do not hold the lock (status, watch, a waiter reporting
	// the holder) can see a record half rewritten: a read is not atomic with
	// a concurrent write. A torn read is re-read; only a record that stays
	// unreadable is corrupt.
	var (
		r   record
		err error
	)
	for attempt := range 20 {
		if r, err = readRecordOnce(f); !isTorn(err) {
			return r, err
		}
		time.Sleep(time.Duration(attempt+1) * 100 * time.Microsecond)
	}
	return r, err
}

// isTorn reports whether err is a record that did not decode, which a
// concurrent rewrite can cause.
func isTorn(err error) bool {
	var se *json.SyntaxError
	return errors.As(err, &se)
}

func readRecordOnce(f *os.File) (record, error) {
	buf := make([]byte, 4096)
	n, err := f.ReadAt(buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return record{}, classified(err, "cannot read lock file "+f.Name())
	}
	line, _, _ := bytes.Cut(buf[:n], []byte("\n"))
	var r record
	if len(bytes.TrimSpace(line)) == 0 {
		return record{}, nil
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return record{}, newError(lease.ErrConfig, err, fmt.Sprintf("lock file %s is corrupt; inspect it, then remove it (tokens still never go back: they follow the clock)", f.Name()))
	}
	if r.Token > MaxToken {
		return record{}, newError(lease.ErrConfig, nil, fmt.Sprintf(
			"lock file %s is corrupt: its fencing counter %d is not below 2^53; inspect it, then remove it (tokens still never go back: they follow the clock)", f.Name(), r.Token))
	}
	return r, nil
}

// writeRecord rewrites f in place (never a new inode). It does not sync
// it: nothing in the record needs to survive a power loss. The holder is
// gone with the machine (and its flock with it), and the token needs no
// durable counter, because mint returns a token only once the clock has
// passed it, so every token minted after a reboot is larger than any the
// lost write held, as long as the clock does not step back (the one
// assumption tokens rest on; see "Fencing tokens" above). An fdatasync
// here would cost every run a journal commit before its child
// (docs/performance.md, start-up cost).
func writeRecord(f *os.File, r record) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if _, err := f.WriteAt(b, 0); err != nil {
		return err
	}
	return f.Truncate(int64(len(b)))
}

func (r record) holder() lease.Holder {
	return lease.Holder{Name: r.Name, Label: r.Holder, ID: r.ID, Token: r.Token, Since: r.Since}
}

// holdLeft is what remains of the record's hold at now; 0 when there is
// none (or the record is held, when the lock decides).
func (r record) holdLeft(now time.Time) time.Duration {
	if r.Held || r.HeldUntil.IsZero() {
		return 0
	}
	return max(r.HeldUntil.Sub(now), 0)
}

// heldError reports the lease taken by r's hold.
func (r record) heldError(name string, left time.Duration) *lease.HeldError {
	by := r.holder()
	by.Name, by.ID, by.HeldUntil, by.Remaining = name, "", r.HeldUntil, left
	return &lease.HeldError{By: by}
}
