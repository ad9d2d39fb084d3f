package objlease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// counter is a counter object's content.
type counter struct {
	Name  string `json:"name"`
	Token uint64 `json:"token"`
}

// counterTries bounds the compare-and-swap rounds on a counter: every
// acquisition of any slot of the name writes it.
const counterTries = 20

// maxToken is where tokens stop: JSON readers hold them exactly below 2^53.
const maxToken = 1<<53 - 1

// mint raises the counter of the lease whose (slot) name is name and
// returns its new value: max(counter + 1, the store's clock in µs), written
// with a create if absent or a replace on the version read, and above
// floor (the token the lease object held before this acquisition): a
// counter deleted within the second of its last token would else mint that
// token again, as a Date counts whole seconds; and the
// store's clock it counted (zero when the store sent no Date). A counter
// further ahead of that clock than lease.MaxClockSkew is refused
// (lease.ErrTokenAhead), and nothing is written.
func (s *Store) mint(ctx context.Context, name string, floor uint64) (uint64, time.Time, error) {
	base, _, _ := lease.ParseSlotName(name)
	key := tokenKey(base)
	for range counterTries {
		if err := s.checkOpen(); err != nil {
			return 0, time.Time{}, err
		}
		o, err := s.b.Get(ctx, key)
		absent := errors.Is(err, ErrNotFound)
		if err != nil && !absent {
			return 0, time.Time{}, err
		}
		var c counter
		if !absent && (json.Unmarshal(o.Body, &c) != nil || c.Name != base) {
			return 0, time.Time{}, lease.NewError(fmt.Sprintf("%s: the object %s is not the token counter of lease %s: delete it, or choose another lease name", s.b.Where(), key, base), lease.ErrConfig)
		}
		next := max(c.Token, floor) + 1
		if !o.Date.IsZero() {
			next = max(next, uint64(o.Date.UnixMicro()))
			if lease.TokenAhead(next, o.Date) {
				return 0, time.Time{}, lease.TokenAheadError(name, next, o.Date, fmt.Sprintf("the object %s at %s", key, s.b.Where()))
			}
		}
		if next > maxToken {
			return 0, time.Time{}, lease.NewError(fmt.Sprintf("%s: the token counter of lease %s is at %d, the largest token there is", s.b.Where(), base, c.Token), lease.ErrConfig)
		}
		body, _ := json.Marshal(counter{Name: base, Token: next})
		if absent {
			_, err = s.b.Create(ctx, key, body)
		} else {
			_, err = s.b.Replace(ctx, key, body, o.Version)
		}
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			continue // raised by another acquisition meanwhile
		}
		if err != nil {
			return 0, time.Time{}, err
		}
		return next, o.Date, nil
	}
	return 0, time.Time{}, lease.NewError(fmt.Sprintf("%s: the token counter of lease %s kept changing under %d tries", s.b.Where(), base, counterTries), lease.ErrUnavailable)
}
