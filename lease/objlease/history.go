package objlease

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Run history. The runs of lease NAME live in one object, history/NAME:
// {"name": NAME, "runs": {"TOKEN": RUN-JSON, …}}. A write reads it, sets
// its run, drops what is not a valid run and the runs beyond keep
// (lease.NewestRuns) and then, while the runs exceed historyBytes, the
// oldest; and writes it back conditional on the version read (a create
// when there is none), reading again when another write came first.

// historyBytes bounds a history object: every reader reads it whole.
const historyBytes = 512 << 10

// historyTries bounds the read-modify-write rounds of one RecordRun.
const historyTries = 5

// historyDoc is a history object's content.
type historyDoc struct {
	Name string            `json:"name"`
	Runs map[string]string `json:"runs"`
}

var _ lease.History = (*Store)(nil)

// RecordRun writes r into its lease's history, trimming it to keep.
func (s *Store) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	for range historyTries {
		if err := s.checkOpen(); err != nil {
			return err
		}
		doc, v, err := s.readHistory(cctx, r.Name)
		if err != nil {
			return err
		}
		doc.Runs[strconv.FormatUint(r.Token, 10)] = string(b)
		trimRuns(doc, lease.HistoryKeep(keep))
		body, _ := json.Marshal(doc)
		if v == "" {
			_, err = s.b.Create(cctx, historyKey(r.Name), body)
		} else {
			_, err = s.b.Replace(cctx, historyKey(r.Name), body, v)
		}
		if errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
			continue
		}
		return err
	}
	return lease.NewError(fmt.Sprintf("%s: record a run of %s: the history kept changing under us", s.b.Where(), r.Name), lease.ErrUnavailable)
}

// trimRuns keeps in doc the keep newest valid runs that fit historyBytes.
func trimRuns(doc *historyDoc, keep int) {
	kept := map[string]string{}
	size := 0
	for _, r := range runsOf(doc, keep) {
		k := strconv.FormatUint(r.Token, 10)
		if size += len(k) + len(doc.Runs[k]); size > historyBytes {
			break
		}
		kept[k] = doc.Runs[k]
	}
	doc.Runs = kept
}

// runsOf reads the valid runs of doc, newest first, at most keep (keep <=
// 0: all). An entry whose key is not its record's token is not a run.
func runsOf(doc *historyDoc, keep int) []lease.Run {
	var runs []lease.Run
	for k, v := range doc.Runs {
		var r lease.Run
		if json.Unmarshal([]byte(v), &r) != nil || strconv.FormatUint(r.Token, 10) != k {
			continue
		}
		runs = append(runs, r)
	}
	return lease.NewestRuns(runs, lease.RunBounds{Name: doc.Name, Now: time.Now(), ClockTokens: true}, keep)
}

// Runs returns up to limit valid runs of name, newest first.
func (s *Store) Runs(ctx context.Context, name string, limit int) ([]lease.Run, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	if err := s.checkOpen(); err != nil {
		return nil, err
	}
	doc, _, err := s.readHistory(cctx, name)
	if err != nil {
		return nil, err
	}
	runs := runsOf(doc, limit)
	if runs == nil {
		runs = []lease.Run{}
	}
	return runs, nil
}

// readHistory reads name's history and its version ("" when there is
// none: an empty history).
func (s *Store) readHistory(ctx context.Context, name string) (*historyDoc, string, error) {
	doc := &historyDoc{Name: name, Runs: map[string]string{}}
	o, err := s.b.Get(ctx, historyKey(name))
	if errors.Is(err, ErrNotFound) {
		return doc, "", nil
	}
	if err != nil {
		return nil, "", err
	}
	var got historyDoc
	if json.Unmarshal(o.Body, &got) != nil || got.Name != name {
		return nil, "", lease.NewError(fmt.Sprintf("%s: the object %s is not leaderrun's run history of lease %s: delete it", s.b.Where(), historyKey(name), name), lease.ErrConfig)
	}
	if got.Runs != nil {
		doc.Runs = got.Runs
	}
	return doc, o.Version, nil
}
