package objlease

import (
	"encoding/hex"
	"encoding/json"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Keys of the objects of a lease name (see the package doc).
func leaseKey(name string) string   { return "lease/" + name }
func tokenKey(name string) string   { return "token/" + name }
func historyKey(name string) string { return "history/" + name }
func standbyPrefix(name string) string {
	return "standby/" + name + "@"
}

// record is a lease object's content.
type record struct {
	// Name is the lease (or slot) name: an object copied to another key is
	// not taken for that key's lease.
	Name string `json:"name"`
	// Holder is the holder's label; empty once released.
	Holder string `json:"holder,omitempty"`
	// ID is the acquisition ID.
	ID string `json:"id,omitempty"`
	// Token is the fencing token of the acquisition.
	Token uint64 `json:"token,omitempty"`
	// TTL is how long a waiter that sees this version unchanged waits
	// before it judges the lease free.
	TTL time.Duration `json:"ttl_ns,omitempty"`
	// Since is the acquisition's wall-clock time (display only).
	Since time.Time `json:"since,omitzero"`
	// Renewed is the holder's wall clock at this write: status reads it
	// (display only).
	Renewed time.Time `json:"renewed,omitzero"`
	// HeldUntil is the end of a hold (ReleaseHeld), by the wall clock.
	HeldUntil time.Time `json:"held_until,omitzero"`
	// Write is random per write, so that every write changes the
	// object's version.
	Write string `json:"write"`
}

func (r record) encode() []byte {
	r.Write = newWrite()
	b, _ := json.Marshal(r) // plain fields: cannot fail
	return b
}

func newWrite() string {
	var b [8]byte
	lease.Random(b[:])
	return hex.EncodeToString(b[:])
}

// ours reports whether r still records acquisition info.
func (r record) ours(info lease.Holder) bool {
	return r.Holder == info.Label && r.ID == info.ID && r.Token == info.Token
}

func (r record) holder() lease.Holder {
	return lease.Holder{Name: r.Name, Label: r.Holder, Token: r.Token, Since: r.Since, TTL: r.TTL, HeldUntil: r.HeldUntil}
}
