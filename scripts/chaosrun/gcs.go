package main

import (
	"context"
	"io"
	"path/filepath"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
)

// ---- GCS (fake-gcs-server) ----

// newGCSFaults injects faults into the emulator scripts/fakegcs.sh started
// in c.gcsDir: one process, so a signal to its PID pauses or kills it all;
// its objects are files (filesystem backend) that survive a kill.
func newGCSFaults(d *driver) (storeFaults, error) {
	s, env, err := newScriptServer(d, serverSpec{store: "gcs", flag: "gcs", dir: d.c.gcsDir,
		script: filepath.Join(d.c.gcsScripts, "fakegcs.sh"), proc: "fake-gcs-server",
		pidVar: "LEADERRUN_TEST_GCS_PID", addrVar: "LEADERRUN_TEST_GCS_EMULATOR_HOST", addrIs: "emulator host"})
	if err != nil {
		return nil, err
	}
	client, err := storage.NewClient(context.Background(), option.WithEndpoint("http://"+env["LEADERRUN_TEST_GCS_EMULATOR_HOST"]+"/storage/v1/"),
		option.WithoutAuthentication(), storage.WithJSONReads(), storage.WithDisabledClientMetrics())
	if err != nil {
		return nil, err
	}
	client.SetRetry(storage.WithPolicy(storage.RetryNever))
	o := gcsObject{client.Bucket("leases").Object("chaos/lease/" + d.c.name)}
	return &serverFaults{scriptServer: s, keyKinds: []string{"key_delete", "key_edit"}, key: objectKeyFault(d, o),
		release: func() { _ = client.Close() }}, nil
}

// gcsObject is the lease's object in the emulator.
type gcsObject struct{ h *storage.ObjectHandle }

func (o gcsObject) get(ctx context.Context) (io.ReadCloser, error) { return o.h.NewReader(ctx) }

func (o gcsObject) put(ctx context.Context, b []byte) error {
	w := o.h.NewWriter(ctx)
	w.ChunkSize = 0
	if _, err := w.Write(b); err != nil {
		return err
	}
	return w.Close()
}

func (o gcsObject) del(ctx context.Context) error {
	if err := o.h.Delete(ctx); err != nil && err != storage.ErrObjectNotExist {
		return err
	}
	return nil
}
