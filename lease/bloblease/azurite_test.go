package bloblease

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore/streaming"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blockblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	azlease "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

const envAzurite = "LEADERRUN_TEST_AZURITE"

// azurite returns the shared test Azurite endpoint
// (http://127.0.0.1:PORT/devstoreaccount1). Without one the test is skipped,
// except under CI, where a skipped integration test is a failure.
func azurite(t *testing.T) string {
	t.Helper()
	ep := leasetest.RequireEnv(t, envAzurite)
	return strings.TrimRight(ep, "/")
}

// privateAzurite starts an Azurite only this test uses (so it may kill it)
// and returns its endpoint and PID.
func privateAzurite(t *testing.T) (string, int) {
	t.Helper()
	azurite(t) // same skip rule
	env := leasetest.StartServer(t, t.TempDir(), "../../scripts/azurite.sh")
	if env[envAzurite] == "" {
		t.Fatalf("azurite.sh wrote no endpoint: %v", env)
	}
	return env[envAzurite], leasetest.ServerPID(t, env, envAzurite+"_PID")
}

// freshContainer returns a container name no other test uses.
func freshContainer() string { return "lrtest-" + lease.NewID()[:12] }

func openAzurite(t *testing.T, endpoint, cont string, o Options) *Store {
	t.Helper()
	if o.Getenv == nil {
		o.Getenv = env(map[string]string{envKey: devKey})
	}
	s, err := Open(context.Background(), "azblob+"+endpoint+"/"+cont+"?poll=200ms", o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return s
}

func breakLease(t *testing.T, s lease.Store, name string) {
	t.Helper()
	lc, err := azlease.NewBlobClient(s.(*Store).blob(name), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.BreakLease(context.Background(), &azlease.BlobBreakOptions{BreakPeriod: to[int32](0)}); err != nil {
		t.Fatalf("BreakLease: %v", err)
	}
}

func TestConformance(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	cont := freshContainer()
	leasetest.Run(t, leasetest.Harness{
		Open:         func(t *testing.T) lease.Store { return openAzurite(t, ep, cont, Options{CallTimeout: 5 * time.Second}) },
		TTL:          15 * time.Second,
		Break:        breakLease,
		TrimsAtStart: true,
		PutRunEntry: func(t *testing.T, name string, _ uint64, value []byte) {
			s := openAzurite(t, ep, cont, Options{CallTimeout: 5 * time.Second})
			defer s.Close()
			ac := s.cc.NewAppendBlobClient(runsBlobName(name))
			if _, err := ac.AppendBlock(context.Background(), streaming.NopCloser(bytes.NewReader(append(value, '\n'))), nil); err != nil {
				t.Fatalf("AppendBlock: %v", err)
			}
		},
	})
}

func req15(name, holder string) lease.Request {
	return lease.Request{Name: name, Label: holder, ID: lease.NewID(), TTL: 15 * time.Second}
}

// TestCreateRace: five racers on an empty container: one winner, no errors
// from the racing creates; the blob refuses writes without the lease ID.
func TestCreateRace(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	cont := freshContainer()
	const n = 5
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []lease.Lease
		start   = make(chan struct{})
	)
	for i := range n {
		s := openAzurite(t, ep, cont, Options{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			l, err := s.TryAcquire(context.Background(), req15("race", fmt.Sprintf("racer-%d", i)))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, l)
			case errors.Is(err, lease.ErrHeld):
			default:
				t.Errorf("racer %d: %v", i, err)
			}
		}()
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d winners; want 1", len(winners))
	}
	s := openAzurite(t, ep, cont, Options{})
	got, err := s.Status(context.Background(), "race")
	if err != nil || got == nil || got.Label != winners[0].Info().Label || got.Token != winners[0].Info().Token || got.Token == 0 {
		t.Fatalf("Status = %+v, %v; want the winner %+v with its token", got, err, winners[0].Info())
	}
	_, err = s.blob("race").SetMetadata(context.Background(), map[string]*string{"x": to("y")}, nil)
	if !bloberror.HasCode(err, bloberror.LeaseIDMissing) {
		t.Fatalf("metadata write without the lease ID: %v; want LeaseIdMissing", err)
	}
	if err := winners[0].Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
}

// TestRecord checks the holder record round trip (non-ASCII label) and that
// a retried acquire with the same ID is granted again.
func TestRecord(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	s := openAzurite(t, ep, freshContainer(), Options{})
	r := req15("team/nightly.backup", "jörg's box:42")
	l, err := s.TryAcquire(context.Background(), r)
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	again, err := s.TryAcquire(context.Background(), r) // a retry after a lost answer
	if err != nil {
		t.Fatalf("TryAcquire retried with the same ID: %v; want granted", err)
	}
	if again.Info().Token <= l.Info().Token {
		t.Fatalf("retry token %d <= %d", again.Info().Token, l.Info().Token)
	}
	got, err := s.Status(context.Background(), r.Name)
	if err != nil || got == nil {
		t.Fatalf("Status = %v, %v", got, err)
	}
	want := again.Info()
	want.ID = "" // not stored
	if !got.Since.Equal(want.Since) || got.Label != want.Label || got.Token != want.Token || got.TTL != want.TTL || got.Name != want.Name {
		t.Fatalf("Status = %+v; want %+v", *got, want)
	}
	if err := l.Release(context.Background()); err != nil { // same lease ID as again
		t.Fatalf("Release: %v", err)
	}
}

// TestSecretsNotShown: a wrong key or a forged SAS is refused as ErrConfig,
// and neither the key nor the signature shows up in errors or logs.
func TestSecretsNotShown(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	cont := freshContainer()
	const forgedSig = "Zm9yZ2VkLXNpZ25hdHVyZQ%3D%3D"
	cases := []struct {
		name, url string
		env       map[string]string
		secrets   []string
	}{
		{"wrong key", "azblob+" + ep + "/" + cont, map[string]string{envKey: testKey}, []string{testKey, "c2VjcmV0"}},
		{"wrong key in connection string", "azblob:///" + cont,
			map[string]string{envConnString: "DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=" + testKey + ";BlobEndpoint=" + ep + ";"},
			[]string{testKey, "c2VjcmV0"}},
		{"forged SAS", "azblob+" + ep + "/" + cont + "?sv=2023-11-03&ss=b&srt=sco&sp=rwdlac&se=2099-01-01T00%3A00%3A00Z&sig=" + forgedSig, nil,
			[]string{forgedSig, "Zm9yZ2Vk"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			s, err := Open(context.Background(), tc.url, Options{Getenv: env(tc.env), Log: log})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			_, err = s.TryAcquire(context.Background(), req15("secret", "h"))
			if !errors.Is(err, lease.ErrConfig) || !strings.Contains(err.Error(), "403") {
				t.Fatalf("TryAcquire = %v; want ErrConfig with HTTP 403", err)
			}
			_, serr := s.Status(context.Background(), "secret")
			if !errors.Is(serr, lease.ErrConfig) {
				t.Fatalf("Status = %v; want ErrConfig", serr)
			}
			t.Logf("error: %v", err)
			if msg := err.Error(); !strings.HasPrefix(msg, "Azure Blob Storage at "+ep) || !strings.Contains(msg, "credentials come from") || strings.Contains(msg, "lease: ") {
				t.Fatalf("message %q: want the endpoint and how to give credentials, without package chains", msg)
			}
			assertNoSecret(t, err.Error()+"\n"+serr.Error()+"\n"+logs.String(), tc.secrets...)
		})
	}
}

// accountSAS signs an account SAS of Azurite's account with perms, valid
// for an hour.
func accountSAS(t *testing.T, perms sas.AccountPermissions) sas.QueryParameters {
	t.Helper()
	cred, err := container.NewSharedKeyCredential(devAccount, devKey)
	if err != nil {
		t.Fatal(err)
	}
	qp, err := sas.AccountSignatureValues{
		Protocol:      sas.ProtocolHTTPSandHTTP,
		ExpiryTime:    time.Now().Add(time.Hour).UTC(),
		Permissions:   perms.String(),
		ResourceTypes: (&sas.AccountResourceTypes{Service: true, Container: true, Object: true}).String(),
	}.SignWithSharedKey(cred)
	if err != nil {
		t.Fatal(err)
	}
	return qp
}

// TestAccountSAS: a real account SAS in the URL works and is not shown when
// the server is gone.
func TestAccountSAS(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	qp := accountSAS(t, sas.AccountPermissions{Read: true, Write: true, Create: true, Add: true, List: true})
	raw := "azblob+" + ep + "/" + freshContainer() + "?" + qp.Encode()
	s, err := Open(context.Background(), raw, Options{Getenv: env(map[string]string{envKey: "bm90LXVzZWQ="})})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if s.kind != credURLSAS {
		t.Fatalf("credential %q; want %q", s.kind, credURLSAS)
	}
	l, err := s.TryAcquire(context.Background(), req15("sas", "h"))
	if err != nil {
		t.Fatalf("TryAcquire with an account SAS: %v", err)
	}
	if err := l.Renew(context.Background()); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	if err := l.Release(context.Background()); err != nil {
		t.Fatalf("Release: %v", err)
	}
	// Point the same SAS at a closed port: the network error must not quote it.
	s2, err := Open(context.Background(), "azblob+http://127.0.0.1:9/devstoreaccount1/x-sas?"+qp.Encode(), Options{CallTimeout: time.Second})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	_, err = s2.TryAcquire(context.Background(), req15("sas", "h"))
	if !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("TryAcquire against a closed port = %v; want ErrUnavailable", err)
	}
	assertNoSecret(t, err.Error(), qp.Signature(), strings.Split(qp.Encode(), "sig=")[1])
}

// TestRenewAfterBreak: an operator's BreakLease makes the next renew ErrLost
// and the holder's release ErrNotHeld.
func TestRenewAfterBreak(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	s := openAzurite(t, ep, freshContainer(), Options{})
	l, err := s.TryAcquire(context.Background(), req15("broken", "h"))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	breakLease(t, s, "broken")
	if err := l.Renew(context.Background()); !errors.Is(err, lease.ErrLost) {
		t.Fatalf("Renew after break = %v; want ErrLost", err)
	}
	if got, err := s.Status(context.Background(), "broken"); err != nil || got != nil {
		t.Fatalf("Status after break = %+v, %v; want free", got, err)
	}
	if err := l.Release(context.Background()); err != nil && !errors.Is(err, lease.ErrNotHeld) {
		// Azure lets the old ID release a broken lease; either answer is fine,
		// but nothing else is.
		t.Fatalf("Release after break = %v", err)
	}
}

// TestStoreDown: a frozen, then killed, Azurite makes Renew fail with a
// non-lost error within the call timeout, and the lease survives a freeze.
func TestStoreDown(t *testing.T) {
	t.Parallel()
	ep, pid := privateAzurite(t)
	const callTimeout = 2 * time.Second
	const slack = time.Second
	s := openAzurite(t, ep, freshContainer(), Options{CallTimeout: callTimeout})
	start := time.Now()
	l, err := s.TryAcquire(context.Background(), req15("down", "h"))
	if err != nil {
		t.Fatalf("TryAcquire: %v", err)
	}
	t.Logf("first acquire (creates container and blob): %v", time.Since(start))

	renewFails := func(what string) {
		t.Helper()
		start := time.Now()
		err := l.Renew(context.Background())
		took := time.Since(start)
		if err == nil || errors.Is(err, lease.ErrLost) || !errors.Is(err, lease.ErrUnavailable) {
			t.Fatalf("Renew with Azurite %s = %v; want ErrUnavailable, not ErrLost", what, err)
		}
		if took > callTimeout+slack {
			t.Fatalf("Renew with Azurite %s took %v; want at most %v", what, took, callTimeout+slack)
		}
		t.Logf("Renew with Azurite %s: %v after %v", what, err, took)
	}

	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	leasetest.WaitStopped(t, pid)
	renewFails("frozen")
	if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if err := l.Renew(context.Background()); err != nil {
		t.Fatalf("Renew after thaw: %v", err)
	}

	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitGone(t, pid)
	renewFails("killed")
	_, err = s.Status(context.Background(), "down")
	if !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("Status with Azurite killed = %v; want ErrUnavailable", err)
	}
	if want := "cannot reach Azure Blob Storage at " + s.where + ": connection refused"; err.Error() != want {
		t.Fatalf("message %q; want %q", err, want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if _, err := s.TryAcquire(ctx, req15("down", "h2")); !errors.Is(err, lease.ErrUnavailable) {
		t.Fatalf("TryAcquire with Azurite killed = %v; want ErrUnavailable", err)
	}
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err != nil || strings.Contains(string(b), ") Z ") {
			return // gone or a zombie of the script's shell
		}
	}
	t.Fatalf("Azurite pid %d still running after SIGKILL", pid)
}

// TestWaitPolls: Wait returns soon after a release, and on cancel.
func TestWaitPolls(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	s := openAzurite(t, ep, freshContainer(), Options{})
	if err := s.Wait(context.Background(), "never-used", nil); err != nil {
		t.Fatalf("Wait on a missing blob: %v", err)
	}
	l, err := s.TryAcquire(context.Background(), req15("w", "h"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 700*time.Millisecond)
	defer cancel()
	if err := s.Wait(ctx, "w", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait while held = %v; want deadline exceeded", err)
	}
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = l.Release(context.Background())
	}()
	start := time.Now()
	if err := s.Wait(context.Background(), "w", nil); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	// A released lease ends no timer, so only a poll can notice it: Wait
	// returning at all shows that it polls. How soon it does is a
	// benchmark's figure (a loaded machine stretches it); what a test can
	// say is that it came well inside the lease's TTL, not at its end.
	if took := time.Since(start); took >= req15("w", "h").TTL/2 {
		t.Fatalf("Wait returned %v after start; want well within the lease's TTL", took)
	}
}

// BenchmarkAcquireRelease measures one TryAcquire (acquire, read, write
// metadata) plus one Release against Azurite.
func BenchmarkAcquireRelease(b *testing.B) {
	ep := os.Getenv(envAzurite)
	if ep == "" {
		b.Skip(envAzurite + " is not set")
	}
	s, err := Open(context.Background(), "azblob+"+ep+"/"+freshContainer(), Options{Getenv: env(map[string]string{envKey: devKey})})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var acq, rel, renew time.Duration
	for b.Loop() {
		t0 := time.Now()
		l, err := s.TryAcquire(ctx, req15("bench", "h"))
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		if err := l.Renew(ctx); err != nil {
			b.Fatal(err)
		}
		t2 := time.Now()
		if err := l.Release(ctx); err != nil {
			b.Fatal(err)
		}
		acq, renew, rel = acq+t1.Sub(t0), renew+t2.Sub(t1), rel+time.Since(t2)
	}
	b.ReportMetric(float64(acq.Microseconds())/float64(b.N), "acquire-µs/op")
	b.ReportMetric(float64(renew.Microseconds())/float64(b.N), "renew-µs/op")
	b.ReportMetric(float64(rel.Microseconds())/float64(b.N), "release-µs/op")
}

func TestCandidates(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	cont := freshContainer()
	leasetest.RunCandidates(t, leasetest.Harness{
		Open: func(t *testing.T) lease.Store { return openAzurite(t, ep, cont, Options{CallTimeout: 5 * time.Second}) },
		TTL:  15 * time.Second,
	})
}

// A hold longer than any break period: the lease becomes infinite, so Azure
// itself refuses every other acquisition; status and a refused attempt name
// the hold's end; once that end has passed (set in the past here, so the
// test need not wait), the next attempt breaks the hold and takes the lease
// with a higher token. A break made on a stale read (If-Match on an ETag
// from before a new holder wrote its record) fails and leaves the new
// holder's lease alone.
func TestLongHold(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	cont := freshContainer()
	s := openAzurite(t, ep, cont, Options{CallTimeout: 5 * time.Second})
	other := openAzurite(t, ep, cont, Options{CallTimeout: 5 * time.Second})
	ctx := context.Background()
	first, err := s.TryAcquire(ctx, req15("long", "alpha"))
	if err != nil {
		t.Fatal(err)
	}
	const hold = 10 * time.Minute
	before, err := s.blob("long").GetProperties(ctx, nil)
	if err != nil || before.Date == nil {
		t.Fatalf("GetProperties: %v (Date %v)", err, before.Date)
	}
	if err := first.(*blobLease).ReleaseHeld(ctx, hold); err != nil {
		t.Fatalf("ReleaseHeld(%v): %v", hold, err)
	}
	_, err = other.TryAcquire(ctx, req15("long", "beta"))
	var he *lease.HeldError
	if !errors.As(err, &he) || he.By.Label != "alpha" {
		t.Fatalf("TryAcquire during the hold: %v (%+v); want held by alpha", err, he)
	}
	// The end is on Azure's clock: a Date (whole seconds) read during the
	// call, plus the hold, plus the second the Date may lag.
	if until := he.By.HeldUntil; until.Before(before.Date.Add(hold+time.Second)) || until.Nanosecond() != 0 {
		t.Fatalf("held until %v; want a whole second at least %v after Azure's Date %v before the release", until, hold+time.Second, *before.Date)
	}
	st, err := other.Status(ctx, "long")
	if err != nil || st == nil || !st.HeldUntil.Equal(he.By.HeldUntil) {
		t.Fatalf("Status during the hold: %+v, %v", st, err)
	}
	if _, h, err := other.Candidates(ctx, "long"); err != nil || h == nil || h.Label != "alpha" {
		t.Fatalf("Candidates during the hold: holder %+v, %v; want alpha", h, err)
	}
	// The hold's end moves into the past (the holder's lease ID still
	// owns the infinite lease).
	bc := s.blob("long")
	endHoldNow(t, bc, first.(*blobLease))
	stale, err := bc.GetProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	holdID, _ := metaGet(stale.Metadata, metaHoldLease)
	if want := *first.(*blobLease).lc.LeaseID(); holdID != want {
		t.Fatalf("the hold's lease ID in the metadata is %q, want %q", holdID, want)
	}
	if st, err := other.Status(ctx, "long"); err != nil || st != nil {
		t.Fatalf("Status after the hold's end: %+v, %v; want free", st, err)
	}
	// A standby's listing agrees, or the standby would wait for a holder
	// that is gone instead of trying (and ending the hold).
	if _, h, err := other.Candidates(ctx, "long"); err != nil || h != nil {
		t.Fatalf("Candidates after the hold's end: holder %+v, %v; want none", h, err)
	}
	second, err := other.TryAcquire(ctx, req15("long", "beta"))
	if err != nil {
		t.Fatalf("TryAcquire after the hold's end: %v", err)
	}
	if second.Info().Token <= first.Info().Token {
		t.Fatalf("token %d after the hold, not above %d", second.Info().Token, first.Info().Token)
	}
	// A standby that read the ended hold before the new holder took over
	// tries to end it: refused, whether or not the ETag still matches (an
	// acquire alone may leave it unchanged), and by both ways of ending.
	cur, err := bc.GetProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []endedHold{{stale.ETag, holdID}, {cur.ETag, holdID}, {stale.ETag, ""}} {
		if s.endHold(ctx, "long", bc, h) {
			t.Fatalf("ending the hold (ETag current: %v, by lease ID: %v) after a new holder took over succeeded", h.etag == cur.ETag, h.leaseID != "")
		}
	}
	if err := second.Renew(ctx); err != nil {
		t.Fatalf("the new holder's lease after stale attempts to end the hold: %v", err)
	}
}

// endHoldNow moves a long hold's end into the past, keeping the rest of its
// metadata (the hold's lease ID still owns the infinite lease).
func endHoldNow(t *testing.T, bc *blockblob.Client, l *blobLease) {
	t.Helper()
	ctx := context.Background()
	props, err := bc.GetProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	md := map[string]*string{}
	for k, v := range props.Metadata {
		if !strings.EqualFold(k, metaHoldUntil) {
			md[k] = v
		}
	}
	md[metaHoldUntil] = to(time.Now().Add(-time.Second).UTC().Format(time.RFC3339Nano))
	if _, err := bc.SetMetadata(ctx, md, &blob.SetMetadataOptions{AccessConditions: &blob.AccessConditions{
		LeaseAccessConditions: &blob.LeaseAccessConditions{LeaseID: l.lc.LeaseID()}}}); err != nil {
		t.Fatal(err)
	}
}

// An ended hold is released with its own lease ID (the blob's lease becomes
// available, not broken), and only while the blob is as it was read.
func TestEndHoldReleases(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	s := openAzurite(t, ep, freshContainer(), Options{CallTimeout: 5 * time.Second})
	ctx := context.Background()
	first, err := s.TryAcquire(ctx, req15("rel", "alpha"))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.(*blobLease).ReleaseHeld(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	bc := s.blob("rel")
	endHoldNow(t, bc, first.(*blobLease))
	he, ended := s.held(ctx, "rel", bc)
	if ended == nil || ended.leaseID != *first.(*blobLease).lc.LeaseID() {
		t.Fatalf("held: %v, %+v; want an ended hold with alpha's lease ID", he, ended)
	}
	// The metadata changes after the read (as a new hold's would): the
	// release on the old ETag is refused.
	endHoldNow(t, bc, first.(*blobLease))
	if s.endHold(ctx, "rel", bc, *ended) {
		t.Fatal("ending the hold on a stale ETag succeeded")
	}
	_, ended = s.held(ctx, "rel", bc)
	if ended == nil || !s.endHold(ctx, "rel", bc, *ended) {
		t.Fatalf("ending the hold failed (%+v)", ended)
	}
	props, err := bc.GetProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if props.LeaseState == nil || *props.LeaseState != azlease.StateTypeAvailable {
		t.Fatalf("lease state after ending the hold: %v; want available (released)", props.LeaseState)
	}
}

// A hold whose metadata lacks its lease ID (edited by hand) is ended by a
// break, which can race with a new acquisition: the breaker read the
// hold's ETag, then another client acquired the lease (acquiring does not
// rewrite the metadata, so the ETag may still match) and the break lands
// before that client wrote its record. The break then ends the new lease,
// and the new holder's record write, conditional on its lease ID, fails:
// TryAcquire fails and the child never runs, so the break never leaves two
// holders.
func TestHoldBreakBeforeRecord(t *testing.T) {
	t.Parallel()
	ep := azurite(t)
	s := openAzurite(t, ep, freshContainer(), Options{CallTimeout: 5 * time.Second})
	ctx := context.Background()
	// The blob exists with a past hold's record and no lease.
	first, err := s.TryAcquire(ctx, req15("race", "alpha"))
	if err != nil {
		t.Fatal(err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatal(err)
	}
	req := req15("race", "beta")
	leaseID, err := guid(req.ID)
	if err != nil {
		t.Fatal(err)
	}
	bc := s.blob("race")
	lc, err := azlease.NewBlobClient(bc, &azlease.BlobClientOptions{LeaseID: &leaseID})
	if err != nil {
		t.Fatal(err)
	}
	// beta's acquire step of TryAcquire, then a breaker's read and break.
	if _, err := lc.AcquireLease(ctx, int32(req.TTL/time.Second), nil); err != nil {
		t.Fatal(err)
	}
	props, err := bc.GetProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !s.endHold(ctx, "race", bc, endedHold{etag: props.ETag}) {
		t.Fatal("the break with a current ETag failed")
	}
	l := &blobLease{s: s, lc: lc}
	err = l.record(ctx, bc, req)
	if err == nil {
		t.Fatal("the record write of a broken lease succeeded: its holder would run")
	}
	if !errors.Is(err, lease.ErrUnavailable) {
		t.Errorf("record after a break: %v; want an error wrapping ErrUnavailable (try again)", err)
	}
	after, err := bc.GetProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h := holderFrom("race", after.Metadata); h.Label != "alpha" {
		t.Errorf("the broken lease's holder wrote its record: holder %q", h.Label)
	}
}

// A connection slower to set up than a call's try (a loaded service's
// first answer) is a wait, not a failure: Acquire sets it up within its
// wait (Connect), and the calls use it. Before set-up had a budget of its
// own, every try's new connection was cut short, and the wait ended with
// the store unavailable.
func TestSlowSetupIsAWait(t *testing.T) {
	ep, err := url.Parse(azurite(t))
	if err != nil {
		t.Fatal(err)
	}
	const callTimeout = 600 * time.Millisecond
	proxy, accepted := leasetest.SlowSetup(t, ep.Host, 3*callTimeout)
	ep.Host = proxy
	s := openAzurite(t, ep.String(), freshContainer(), Options{CallTimeout: callTimeout})
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, err := lease.Acquire(ctx, s, req15("slow-setup", "me"), lease.AcquireOptions{Wait: 15 * time.Second, CallTimeout: callTimeout})
	if err != nil {
		t.Fatalf("Acquire with a set-up 3 times the call timeout: %v (%d connections)", err, accepted.Load())
	}
	if err := a.Lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
}
