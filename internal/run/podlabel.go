package run

import (
	"context"
	"log/slog"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// --pod-label KEY=VALUE: while this instance runs COMMAND, its Pod carries
// the label, so that a Service selecting it reaches the leader. It is a
// routing hint, never part of the lease's safety, and never on the way of
// the child's start or stop: the label goes on in the background once the
// child has started, and off in the background as soon as leading ends (a
// lost lease, a step-down, a signal), before the lease is released after
// the child's end. A label left by a holder that died is taken off by the
// next one.

// PodLabel is a Kubernetes label; the zero value is none.
type PodLabel struct{ Key, Value string }

// labelName and labelPrefix are Kubernetes' rules for a label key's name
// (and a value) and its optional DNS-subdomain prefix.
var (
	labelName   = regexp.MustCompile(`^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$`)
	labelPrefix = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)
)

// ParsePodLabel reads --pod-label's KEY=VALUE by Kubernetes' rules.
// spell names the flag (nil: lease.DashFlag).
func ParsePodLabel(s string, spell lease.FlagSpeller) (PodLabel, error) {
	if spell == nil {
		spell = lease.DashFlag
	}
	what := spell("pod-label", strconv.Quote(s))
	key, value, ok := strings.Cut(s, "=")
	prefix, name, hasPrefix := strings.Cut(key, "/")
	if !hasPrefix {
		prefix, name = "", key
	}
	switch {
	case !ok:
		return PodLabel{}, usagef("%s: want KEY=VALUE, such as leaderrun/leader=true", what)
	case name == "" || len(name) > 63 || !labelName.MatchString(name),
		hasPrefix && (len(prefix) > 253 || !labelPrefix.MatchString(prefix)):
		return PodLabel{}, usagef("%s: the key must be a Kubernetes label key: [PREFIX/]NAME, NAME 1-63 letters, digits, '-', '_' or '.'", what)
	case len(value) > 63 || !labelName.MatchString(value):
		return PodLabel{}, usagef("--pod-label %q: the value must be a Kubernetes label value: at most 63 letters, digits, '-', '_' or '.'", what)
	}
	return PodLabel{Key: key, Value: value}, nil
}

// podLabeler is what --pod-label needs of a store: the Kubernetes store's
// (lease/kubelease).
type podLabeler interface {
	CheckPod(ctx context.Context) error
	LabelPod(ctx context.Context, key, value string) error
	UnlabelPod(ctx context.Context, key, value string) error
}

// openPodLabel checks, before any lease is taken, that store can label
// this process's Pod: it is the Kubernetes store, and the Pod can be read.
func openPodLabel(store lease.Store, l PodLabel, timeout time.Duration, log *slog.Logger) (*podLabel, error) {
	if l.Key == "" {
		return nil, nil
	}
	pl, ok := store.(podLabeler)
	if !ok {
		return nil, lease.NewError("--pod-label needs the Kubernetes store (kubernetes://): Pod labels are Kubernetes'", lease.ErrConfig)
	}
	ctx, cancel := context.WithTimeout(context.Background(), lease.SetupTimeout)
	defer cancel()
	if err := pl.CheckPod(ctx); err != nil {
		return nil, err
	}
	return &podLabel{pl: pl, l: l, log: log, timeout: timeout}, nil
}

// podLabel puts the label on and takes it off for one run, each in the
// background; wait waits for both.
type podLabel struct {
	pl      podLabeler
	l       PodLabel
	timeout time.Duration // bounds each of them, besides the store's call timeout
	log     *slog.Logger

	mu      sync.Mutex
	put     chan struct{} // closed once the label's putting ended; nil: never begun
	stopped bool
	wg      sync.WaitGroup
}

// start puts the label on (the child has started).
func (p *podLabel) start() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped || p.put != nil {
		return
	}
	put := make(chan struct{})
	p.put = put
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		defer close(put)
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
		defer cancel()
		if err := p.pl.LabelPod(ctx, p.l.Key, p.l.Value); err != nil {
			p.log.Warn("--pod-label: could not label this Pod; a Service selecting "+p.l.Key+"="+p.l.Value+" may not reach the leader", "err", err)
			return
		}
		p.log.Debug("pod labelled", "label", p.l.Key+"="+p.l.Value)
	}()
}

// stop takes the label off once it is on (leading ended); only the first
// call does.
func (p *podLabel) stop() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stopped {
		return
	}
	p.stopped = true
	put := p.put
	if put == nil {
		return // never put on
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		<-put
		ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
		defer cancel()
		if err := p.pl.UnlabelPod(ctx, p.l.Key, p.l.Value); err != nil {
			p.log.Warn("--pod-label: could not take the label off this Pod; the next leader takes it off", "err", err)
			return
		}
		p.log.Debug("pod label taken off", "label", p.l.Key+"="+p.l.Value)
	}()
}

// wait waits for the label's putting and taking off.
func (p *podLabel) wait() {
	if p != nil {
		p.wg.Wait()
	}
}
