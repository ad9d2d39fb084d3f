package gcslease

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"cloud.google.com/go/auth"
	"cloud.google.com/go/storage"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/objlease"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

// bucket is objlease's Bucket on a storage client: keys under the URL's
// prefix, versions the objects' generations.
type bucket struct {
	h   *storage.BucketHandle
	cfg *config
}

var (
	_ objlease.Bucket     = (*bucket)(nil)
	_ objlease.ProbeWords = (*bucket)(nil)
)

func newBucket(c *storage.Client, cfg *config) *bucket {
	h := c.Bucket(cfg.bucket)
	if cfg.userProject != "" {
		h = h.UserProject(cfg.userProject)
	}
	return &bucket{h: h, cfg: cfg}
}

// Where names the bucket, prefix and endpoint.
func (b *bucket) Where() string { return b.cfg.where() }

// Conditions names GCS's preconditions for the probe's refusal.
func (b *bucket) Conditions() (create, replace, instead string) {
	return "ifGenerationMatch=0", "ifGenerationMatch", "use Google Cloud Storage, or an emulator that implements ifGenerationMatch on uploads"
}

// WrongVersion is a generation next to v's: not v, and a well-formed one.
func (b *bucket) WrongVersion(v string) string {
	g, _ := strconv.ParseInt(v, 10, 64)
	if g > 1 {
		return strconv.FormatInt(g-1, 10)
	}
	return strconv.FormatInt(g+1, 10)
}

func (b *bucket) obj(key string) *storage.ObjectHandle { return b.h.Object(b.cfg.prefix + key) }

// Get reads an object whole (at most objlease.MaxObject bytes), with its
// generation and the Date of the answer.
func (b *bucket) Get(ctx context.Context, key string) (objlease.Object, error) {
	ctx, box := withDate(ctx)
	r, err := b.obj(key).NewReader(ctx)
	if err != nil {
		return objlease.Object{Date: box.get()}, b.classify("read", key, err)
	}
	defer r.Close()
	body, err := io.ReadAll(io.LimitReader(r, objlease.MaxObject+1))
	if err != nil {
		return objlease.Object{}, b.classify("read", key, err)
	}
	if len(body) > objlease.MaxObject {
		return objlease.Object{}, storeerr.Config("%s: the object %s%s is larger than any leaderrun writes: delete it", b.Where(), b.cfg.prefix, key)
	}
	return objlease.Object{Body: body, Version: strconv.FormatInt(r.Attrs.Generation, 10), Date: box.get()}, nil
}

// Create uploads with ifGenerationMatch=0: only if no object is there.
func (b *bucket) Create(ctx context.Context, key string, body []byte) (string, error) {
	return b.put(ctx, key, body, &storage.Conditions{DoesNotExist: true})
}

// Replace uploads with ifGenerationMatch=version.
func (b *bucket) Replace(ctx context.Context, key string, body []byte, version string) (string, error) {
	g, err := strconv.ParseInt(version, 10, 64)
	if err != nil || g <= 0 {
		// Not a generation this package gave: no object has it.
		return "", fmt.Errorf("%s: write %s%s on version %q: %w", b.Where(), b.cfg.prefix, key, version, objlease.ErrConflict)
	}
	return b.put(ctx, key, body, &storage.Conditions{GenerationMatch: g})
}

// Put uploads unconditionally.
func (b *bucket) Put(ctx context.Context, key string, body []byte) error {
	_, err := b.put(ctx, key, body, nil)
	return err
}

// put is one upload (a single request: ChunkSize 0), conditional on cond
// when it is not nil; it returns the new generation.
func (b *bucket) put(ctx context.Context, key string, body []byte, cond *storage.Conditions) (string, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // aborts the upload when it failed
	o := b.obj(key)
	if cond != nil {
		o = o.If(*cond)
	}
	w := o.NewWriter(ctx)
	w.ChunkSize = 0
	w.ContentType = "application/json"
	if _, err := w.Write(body); err != nil {
		return "", b.classify("write", key, err)
	}
	if err := w.Close(); err != nil {
		return "", b.classify("write", key, err)
	}
	return strconv.FormatInt(w.Attrs().Generation, 10), nil
}

// Delete removes an object; none there is not an error.
func (b *bucket) Delete(ctx context.Context, key string) error {
	err := b.obj(key).Delete(ctx)
	if err == nil {
		return nil
	}
	if err = b.classify("delete", key, err); errors.Is(err, objlease.ErrNotFound) {
		return nil
	}
	return err
}

// List returns the keys under prefix, relative to the store's prefix.
func (b *bucket) List(ctx context.Context, prefix string) ([]string, error) {
	q := &storage.Query{Prefix: b.cfg.prefix + prefix}
	if err := q.SetAttrSelection([]string{"Name"}); err != nil {
		return nil, err
	}
	var keys []string
	it := b.h.Objects(ctx, q)
	for {
		a, err := it.Next()
		if errors.Is(err, iterator.Done) {
			return keys, nil
		}
		if err != nil {
			return nil, b.classify("list", prefix, err)
		}
		if len(a.Name) > len(b.cfg.prefix) {
			keys = append(keys, a.Name[len(b.cfg.prefix):])
		}
	}
}

// classify turns a client error into objlease's sentinels or one line of
// lease.ErrConfig or lease.ErrUnavailable; the client's error stays
// inside.
func (b *bucket) classify(verb, key string, err error) error {
	what := fmt.Sprintf("%s: %s %s%s", b.Where(), verb, b.cfg.prefix, key)
	status := 0
	var ge *googleapi.Error
	if errors.As(err, &ge) {
		status = ge.Code
	}
	var ae *auth.Error
	switch {
	case status == http.StatusPreconditionFailed:
		return fmt.Errorf("%s: %w", what, objlease.ErrConflict)
	case errors.Is(err, storage.ErrBucketNotExist) || (status == http.StatusNotFound && verb == "write") || (status == http.StatusNotFound && verb == "list"):
		// An upload answered 404 has no object to miss: the bucket is.
		return storeerr.Config("%s: the bucket %s does not exist (leaderrun creates no bucket)", b.Where(), b.cfg.bucket)
	case errors.Is(err, storage.ErrObjectNotExist) || status == http.StatusNotFound:
		return fmt.Errorf("%s: %w", what, objlease.ErrNotFound)
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return storeerr.New(fmt.Sprintf("%s: access denied (HTTP %d): check the credentials and that their role on the bucket grants storage.objects.get, create, delete and list (roles/storage.objectUser; docs/stores.md, section GCS)", what, status), lease.ErrConfig, err)
	case errors.As(err, &ae) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
		return storeerr.New(fmt.Sprintf("%s: the Google credentials give no token: %s", what, storeerr.Quote(storeerr.FirstLine(ae.Error()), nil, 0)), lease.ErrConfig, err)
	case status == http.StatusBadRequest:
		return storeerr.New(fmt.Sprintf("%s: the store refused the request (HTTP 400: %s)", what, storeerr.Quote(storeerr.FirstLine(ge.Message), nil, 0)), lease.ErrConfig, err)
	case status == http.StatusNotImplemented:
		return storeerr.New(fmt.Sprintf("%s: the store does not implement a request leaderrun needs (HTTP 501)", what), lease.ErrConfig, err)
	}
	reason := ""
	switch {
	case status == http.StatusTooManyRequests:
		reason = "HTTP 429: GCS takes about one write per second to an object; renew less often"
	case status != 0:
		reason = fmt.Sprintf("HTTP %d", status)
	case storeerr.NetReason(err) != "":
		reason = storeerr.NetReason(err)
	case errors.Is(err, context.DeadlineExceeded):
		reason = "no answer in time"
	case errors.Is(err, context.Canceled):
		reason = "cancelled"
	default:
		reason = "no answer"
	}
	return storeerr.New(fmt.Sprintf("%s: the store is unreachable or failed (%s)", what, reason), lease.ErrUnavailable, err)
}

// dateKey carries a call's dateBox in its context to dateTransport.
type dateKey struct{}

// dateBox holds the Date of a call's last answer.
type dateBox struct {
	mu sync.Mutex
	t  time.Time
}

func (d *dateBox) get() time.Time {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.t
}

func withDate(ctx context.Context) (context.Context, *dateBox) {
	box := &dateBox{}
	return context.WithValue(ctx, dateKey{}, box), box
}

// dateTransport records the Date of each answer in the dateBox of its
// request's context, if any: the client hides the headers of its answers.
type dateTransport struct{ base http.RoundTripper }

func (t *dateTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if resp != nil {
		if box, ok := r.Context().Value(dateKey{}).(*dateBox); ok {
			if d, perr := http.ParseTime(resp.Header.Get("Date")); perr == nil {
				box.mu.Lock()
				box.t = d
				box.mu.Unlock()
			}
		}
	}
	return resp, err
}
