package leasetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// Objects reaches the objects of an object storage bucket directly, not
// through the store: as another program, an operator or a forger would.
type Objects struct {
	// Get returns the content of the object key.
	Get func(key string) ([]byte, error)
	// Put writes body as the object key, unconditionally.
	Put func(key string, body []byte) error
	// Delete removes the object key.
	Delete func(key string) error
}

// ObjectHarness is the Harness of a store kept in objects under prefix
// (objlease's layout, as the S3 and GCS stores keep it): Open opens a
// store of it, Break deletes the lease object (prefix/lease/NAME), and
// PutRunEntry rewrites the entry of token in the history object
// (prefix/history/NAME, a JSON document of the name and its runs by
// token).
func ObjectHarness(open func(t *testing.T) lease.Store, ttl time.Duration, prefix string, o Objects) Harness {
	return Harness{
		Open: open,
		TTL:  ttl,
		Break: func(t *testing.T, _ lease.Store, name string) {
			if err := o.Delete(prefix + "/lease/" + name); err != nil {
				t.Fatalf("delete the lease object of %s: %v", name, err)
			}
		},
		PutRunEntry: func(t *testing.T, name string, token uint64, value []byte) {
			PutObjectRunEntry(t, o, prefix+"/history/"+name, token, value)
		},
	}
}

// PutObjectRunEntry writes value as the entry of token in the history
// object key (see ObjectHarness), keeping its other entries.
func PutObjectRunEntry(t *testing.T, o Objects, key string, token uint64, value []byte) {
	t.Helper()
	b, err := o.Get(key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	var doc struct {
		Name string            `json:"name"`
		Runs map[string]string `json:"runs"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	tok, _ := json.Marshal(token)
	doc.Runs[string(tok)] = string(value)
	b, _ = json.Marshal(doc)
	if err := o.Put(key, b); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}
