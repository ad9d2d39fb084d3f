package main

import (
	"context"
	"encoding/json"
	"io"
	"time"
)

// ---- object stores (S3, GCS) ----

// leaseObject is the chaos lease's object in an object store (chaos.sh's
// URL: bucket leases, prefix chaos, so chaos/lease/NAME).
type leaseObject interface {
	// get opens the object; an error means there is none to read.
	get(ctx context.Context) (io.ReadCloser, error)
	// put writes the object.
	put(ctx context.Context, b []byte) error
	// del deletes the object; none there is no error.
	del(ctx context.Context) error
}

// objectKeyFault injects key_delete and key_edit into o, logging them.
func objectKeyFault(d *driver, o leaseObject) func(ctx context.Context, kind string) error {
	return func(ctx context.Context, kind string) error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		if kind == "key_edit" {
			return editObject(cctx, d, kind, o)
		}
		return d.change(kind, func() error { return o.del(cctx) })
	}
}

// editObject gives the lease's record another acquisition ID, as a hand
// edit would: the holder's renewal finds the record not its own.
func editObject(ctx context.Context, d *driver, kind string, o leaseObject) error {
	r, err := o.get(ctx)
	if err != nil {
		return nil // no record (yet, or deleted): nothing to edit
	}
	b, err := io.ReadAll(r)
	r.Close()
	if err != nil {
		return err
	}
	var rec map[string]any
	if json.Unmarshal(b, &rec) != nil {
		return nil
	}
	rec["id"] = "chaos-edit"
	b, _ = json.Marshal(rec)
	return d.change(kind, func() error { return o.put(ctx, b) })
}
