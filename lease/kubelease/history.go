package kubelease

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	coordv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Run history. The runs of a lease live in one more Lease object, NAME's
// object name + ".lr--history" (auxName), labelled leaderrun/role=history, one
// annotation per run: "leaderrun/run-TOKEN" holding the lease.Run as JSON.
// A write reads the object, sets its run, drops what is not a valid run and
// the runs beyond keep (lease.NewestRuns) and then, while the annotations
// exceed historyBytes, the oldest; and writes it back with an update
// conditional on the version it read (a create when there is none),
// reading again on a conflict. Kubernetes caps an object's annotations at
// 256 KiB, so this store keeps at most what fits in historyBytes (about a
// thousand runs) whatever keep says.

// historyBytes bounds the history's annotations, below Kubernetes' 256 KiB.
const historyBytes = 200 << 10

// runPrefix starts each run's annotation key.
const runPrefix = "leaderrun/run-"

// historyTries bounds the read-modify-write rounds of one RecordRun.
const historyTries = 5

var _ lease.History = (*Store)(nil)

func historyName(name string) string { return auxName(name, "history") }

// RecordRun writes r into name's history, trimming it to keep (see above).
func (s *Store) RecordRun(ctx context.Context, r lease.Run, keep int) error {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	op := "record a run of " + r.Name
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	for range historyTries {
		if s.closed.Load() {
			return s.classify("update", op, errClosed)
		}
		o, rev, err := s.readHistory(cctx, op, r.Name)
		if err != nil {
			return err
		}
		create := o == nil
		if create {
			o = &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{
				Name:        historyName(r.Name),
				Labels:      map[string]string{labelRole: "history", labelManaged: "leaderrun"},
				Annotations: map[string]string{},
			}}
		}
		o.Annotations[runPrefix+strconv.FormatUint(r.Token, 10)] = string(b)
		trimRuns(o.Annotations, r.Name, lease.HistoryKeep(keep), rev)
		if create {
			_, err = s.leases.Create(cctx, o, metav1.CreateOptions{})
		} else {
			_, err = s.leases.Update(cctx, o, metav1.UpdateOptions{})
		}
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			verb := "update"
			if create {
				verb = "create"
			}
			return s.classify(verb, op, err)
		}
	}
	return lease.NewError(fmt.Sprintf("%s: %s: the history kept changing under us", s.cfg.where, op), lease.ErrUnavailable)
}

// trimRuns keeps in ann the run annotations of the keep newest valid runs
// of name that fit in historyBytes, and every other annotation.
func trimRuns(ann map[string]string, name string, keep int, rev uint64) {
	runs := runsOf(ann, name, keep, rev)
	kept := map[string]bool{}
	size := 0
	for _, r := range runs {
		k := runPrefix + strconv.FormatUint(r.Token, 10)
		if size += len(k) + len(ann[k]); size > historyBytes {
			break
		}
		kept[k] = true
	}
	for k := range ann {
		if strings.HasPrefix(k, runPrefix) && !kept[k] {
			delete(ann, k)
		}
	}
}

// runsOf reads the valid runs of name among ann's run annotations, newest
// first, at most keep (keep <= 0: all). An annotation whose key's token is
// not its record's is not a run, nor is one whose token exceeds rev, the
// cluster's revision when the history was read: a token is the revision of
// an acquisition's write (or less), so a greater one was never minted.
func runsOf(ann map[string]string, name string, keep int, rev uint64) []lease.Run {
	var runs []lease.Run
	for k, v := range ann {
		tok, ok := strings.CutPrefix(k, runPrefix)
		if !ok {
			continue
		}
		var r lease.Run
		if json.Unmarshal([]byte(v), &r) != nil || strconv.FormatUint(r.Token, 10) != tok || r.Token > rev {
			continue
		}
		runs = append(runs, r)
	}
	return lease.NewestRuns(runs, lease.RunBounds{Name: name, Now: time.Now()}, keep)
}

// Runs returns up to limit valid runs of name, newest first.
func (s *Store) Runs(ctx context.Context, name string, limit int) ([]lease.Run, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	if s.closed.Load() {
		return nil, s.classify("get", "read the runs of "+name, errClosed)
	}
	o, rev, err := s.readHistory(cctx, "read the runs of "+name, name)
	if err != nil {
		return nil, err
	}
	if o == nil {
		return []lease.Run{}, nil
	}
	return runsOf(o.Annotations, name, limit, rev), nil
}

// readHistory lists name's history object (nil when there is none) and
// the cluster's revision at the read.
func (s *Store) readHistory(ctx context.Context, op, name string) (*coordv1.Lease, uint64, error) {
	ll, err := s.leases.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + historyName(name)})
	if err != nil {
		return nil, 0, s.classify("list", op, err)
	}
	rev, ok := rv(ll.ResourceVersion)
	if !ok {
		return nil, 0, s.errRV(ll.ResourceVersion)
	}
	if len(ll.Items) == 0 {
		return nil, rev, nil
	}
	o := &ll.Items[0]
	if o.Labels[labelRole] != "history" {
		return nil, 0, s.notHistory(name)
	}
	if o.Annotations == nil {
		o.Annotations = map[string]string{}
	}
	return o, rev, nil
}

// notHistory is the error for a history object name that another lease
// uses as its own.
func (s *Store) notHistory(name string) error {
	return lease.NewError(fmt.Sprintf("%s: the Lease %s/%s, where the run history of %s belongs, is another lease's: choose another lease name", s.cfg.where, s.cfg.namespace, historyName(name), name), lease.ErrConfig)
}
