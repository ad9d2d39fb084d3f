package objlease

import (
	"context"
	"errors"
	"time"
)

// Bucket is what a store of objects offers this package: a few operations
// on objects named by keys relative to the store's prefix. Errors that are
// not ErrNotFound or ErrConflict are the transport's own, already written
// for people and classified (lease.ErrUnavailable, lease.ErrConfig);
// nothing of a credential is ever in them.
type Bucket interface {
	// Get returns the object at key; an error wrapping ErrNotFound when
	// there is none (its Date still set when the store sent one).
	Get(ctx context.Context, key string) (Object, error)
	// Create writes body at key only if no object is there, and returns
	// the new version; an error wrapping ErrConflict if one is.
	Create(ctx context.Context, key string, body []byte) (version string, err error)
	// Replace writes body at key only if the object there has version
	// version, and returns the new version; an error wrapping ErrConflict
	// (or ErrNotFound) when it has another or is gone.
	Replace(ctx context.Context, key string, body []byte, version string) (string, error)
	// Put writes body at key whatever is there (standbys only).
	Put(ctx context.Context, key string, body []byte) error
	// Delete removes the object at key; none there is not an error.
	Delete(ctx context.Context, key string) error
	// List returns the keys that start with prefix, in any order.
	List(ctx context.Context, prefix string) ([]string, error)
	// Where names the endpoint and bucket for messages, without secrets.
	Where() string
}

// Object is what Get read.
type Object struct {
	// Body is the object's content.
	Body []byte
	// Version changes on every write of the object (S3's ETag).
	Version string
	// Date is the store's clock at the answer (an HTTP Date); zero when
	// it sent none.
	Date time.Time
}

// Sentinels a Bucket's errors wrap.
var (
	// ErrNotFound: no object at the key.
	ErrNotFound = errors.New("no such object")
	// ErrConflict: a conditional write's condition did not hold.
	ErrConflict = errors.New("condition not met")
)

// MaxObject bounds what Get reads of an object: every object of this
// package is far smaller.
const MaxObject = 1 << 20
