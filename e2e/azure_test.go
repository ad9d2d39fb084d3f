package e2e

// Black-box tests of the Azure Blob store against a real Azurite (started by
// scripts/test.sh, or scripts/azurite.sh start DIR; see LEADERRUN_TEST_AZURITE).
// Azure leases last 15s to 60s, so the slow tests run in parallel; each test
// uses its own container, and the one that kills the server starts its own.

import (
	"encoding/base64"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	azlease "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/sas"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// Azurite's published development account and key.
const (
	azAccount = "devstoreaccount1"
	azDevKey  = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
	// azTTL is the TTL every test here asks for, Azure's minimum.
	azTTL = 15 * time.Second
)

// azEnv is the environment of every leaderrun run against Azurite: the
// account key (bloblease uses AZURE_STORAGE_KEY for the URL's account), with
// any ambient Azure credential that would take precedence blanked out.
func azEnv(key string) []string {
	return []string{
		"AZURE_STORAGE_KEY=" + key,
		"AZURE_STORAGE_CONNECTION_STRING=",
		"AZURE_STORAGE_ACCOUNT=",
		"AZURE_STORAGE_SAS_TOKEN=",
	}
}

// azContainer returns a container name no other test uses.
func azContainer() string { return "lre2e-" + lease.NewID()[:16] }

// azShared returns the shared Azurite endpoint
// (http://127.0.0.1:PORT/devstoreaccount1) and a --store URL for a fresh
// container on it; query ("poll=200ms") is appended when not empty.
func azShared(t *testing.T, query string) (endpoint, store string) {
	t.Helper()
	endpoint = strings.TrimRight(requireEnv(t, "LEADERRUN_TEST_AZURITE"), "/")
	return endpoint, azStoreURL(endpoint, azContainer(), query)
}

func azStoreURL(endpoint, container, query string) string {
	u := "azblob+" + endpoint + "/" + container
	if query != "" {
		u += "?" + query
	}
	return u
}

// azPrivate starts an Azurite only this test uses (so it may kill it) and
// stops it in t.Cleanup. It returns the endpoint and the server's PID.
func azPrivate(t *testing.T) (string, int) {
	t.Helper()
	requireEnv(t, "LEADERRUN_TEST_AZURITE") // same skip rule as the shared server
	env := leasetest.StartServer(t, t.TempDir(), "scripts/azurite.sh")
	if env["LEADERRUN_TEST_AZURITE"] == "" {
		t.Fatalf("azurite.sh wrote no endpoint: %v", env)
	}
	return strings.TrimRight(env["LEADERRUN_TEST_AZURITE"], "/"), leasetest.ServerPID(t, env, "LEADERRUN_TEST_AZURITE_PID")
}

// azBreak breaks the lease on NAME.lease with break period 0, as an operator
// would with `az storage blob lease break`.
func azBreak(t *testing.T, endpoint, container, name string) {
	t.Helper()
	cred, err := blob.NewSharedKeyCredential(azAccount, azDevKey)
	if err != nil {
		t.Fatal(err)
	}
	bc, err := blob.NewClientWithSharedKeyCredential(endpoint+"/"+container+"/"+name+".lease", cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := azlease.NewBlobClient(bc, nil)
	if err != nil {
		t.Fatal(err)
	}
	zero := int32(0)
	if _, err := lc.BreakLease(ctxTimeout(t, 10*time.Second), &azlease.BlobBreakOptions{BreakPeriod: &zero}); err != nil {
		t.Fatalf("BreakLease: %v", err)
	}
}

// 5 instances race on a container and blob that do not exist yet, all
// waiting: the create races are harmless, every instance runs once, never
// two at a time, tokens strictly increase.
func TestAzureManyInstancesNoOverlap(t *testing.T) {
	t.Parallel()
	_, store := azShared(t, "poll=200ms")
	runCrowd(t, append(azEnv(azDevKey), "LEADERRUN_STORE="+store), "crowd", 5, "sleep 0.05")
}

// azStore is Azurite for the shared store tests that fit Azure's 15s
// minimum TTL (storefaults_test.go): each run gets a container of its own.
var azStore = faultStore{
	envVar:   "LEADERRUN_TEST_AZURITE",
	storeURL: func(ep string) string { return azStoreURL(strings.TrimRight(ep, "/"), azContainer(), "") },
	env:      azEnv(azDevKey),
}

func TestAzureNoWaitConflict(t *testing.T) { testNoWaitConflict(t, azStore) }

// An operator breaks the lease (break period 0) under a running leader: the
// next renewal is refused, the child is stopped at once (not at the TTL) and
// leaderrun exits 124 saying leadership was lost.
func TestAzureBrokenLeaseStopsChild(t *testing.T) {
	t.Parallel()
	ep, store := azShared(t, "")
	env := append(azEnv(azDevKey), "LEADERRUN_STORE="+store)
	// --ttl 15s --renew-every 1s passes validation: the child starts.
	leader, child := holdLease(t, env, "victim", "--ttl", "15s", "--renew-every", "1s", "--log-format", "json")
	u, _ := url.Parse(strings.TrimPrefix(store, "azblob+"))
	container := filepath.Base(u.Path)
	broke := time.Now()
	azBreak(t, ep, container, "victim")
	code := leader.wait()
	took := time.Since(broke)
	if code != 124 {
		t.Fatalf("exit %d; want 124 (stderr: %s)", code, leader.stderr.String())
	}
	last := lastJSON(t, leader)
	if last["event"] != "lost" || last["exit_code"] != float64(124) || !strings.Contains(fmt.Sprint(last["msg"]), "lost") {
		t.Fatalf("final line %v; want event lost, exit_code 124", last)
	}
	waitGone(t, child, time.Second)
	// One renew interval (1s) plus the stop (sleep dies on TERM), not the TTL.
	if took > 5*time.Second {
		t.Fatalf("the child was stopped %v after the break; want about one renew interval", took)
	}
	t.Logf("measure: break-to-exit-ms=%d", took.Milliseconds())
}

// Azurite is SIGKILLed under a running leader whose child ignores SIGTERM:
// renewals fail with "connection refused" (not "lost"), so only leaderrun's
// own deadline can stop the child, and it must be dead before the lease could
// expire on the server: before sent+TTL of the last confirmed renewal.
//
// Expected margin, with L=15s, ρ=1%, ε=1s (Azure), K=250ms: the local
// validity is E = sent + L·0.99 − ε = sent + 13.85s; the stop signal goes at
// E−K−G and SIGKILL at E−K = sent + 13.6s. The child ignores TERM, so it dies
// at SIGKILL: margin = L − 13.6s = L·ρ + ε + K ≈ 1.4s, less the kill latency
// (a few ms). A child that obeys TERM would die G earlier (margin ≈ 1.4s + G).
// --renew-every 2s --grace 1s fits: 13.85 − 0.25 − 1 = 12.6s ≥ 2s + 2×1s + 50ms.
func TestAzureStoreKilledStopsChildBeforeExpiry(t *testing.T) {
	t.Parallel()
	ep, azPID := azPrivate(t)
	env := append(azEnv(azDevKey), "LEADERRUN_STORE="+azStoreURL(ep, azContainer(), ""))
	leader := start(t, env, "-v", "--log-format", "json", "--name", "doomed", "--ttl", "15s", "--renew-every", "2s", "--grace", "1s",
		"--", "sh", "-c", `trap "" TERM; echo "ready $$"; exec sleep 300`) // SIG_IGN survives exec
	f := strings.Fields(leader.line())
	if len(f) != 2 || f[0] != "ready" {
		t.Fatalf("child said %q", f)
	}
	child, _ := strconv.Atoi(f[1])
	deaths := leasetest.WatchDeath(t, child)
	waitStderr(t, leader, `"event":"renewed"`, 10*time.Second)
	if err := syscall.Kill(azPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	if code := leader.wait(); code != 124 {
		t.Fatalf("exit %d; want 124 (stderr: %s)", code, leader.stderr.String())
	}
	// The kernel's moment; Azure's lease state says only leased or
	// expired, to the second, so the lease's end is the earliest the
	// server may expire it: last_sent + TTL.
	died := awaitDeath(t, child, deaths).Wall
	if last := lastJSON(t, leader); last["event"] != "lost" || last["exit_code"] != float64(124) {
		t.Fatalf("final line %v; want event lost, exit_code 124", last)
	}
	sent := renewalsSent(t, leader)
	if len(sent) == 0 {
		t.Fatalf("no renewed event: %s", leader.stderr.String())
	}
	lastSent := sent[len(sent)-1]
	expiry := lastSent.Add(azTTL) // the server cannot expire the lease earlier
	margin := expiry.Sub(died)
	if margin <= 0 {
		t.Fatalf("the child died at %v, %v AFTER the lease could have expired (last renewal sent %v)",
			died.Format(time.RFC3339Nano), -margin, lastSent.Format(time.RFC3339Nano))
	}
	t.Logf("Azurite killed %v after the last renewal was sent; child dead %v after it (SIGKILL due at 13.6s)",
		killed.Sub(lastSent).Round(time.Millisecond), died.Sub(lastSent).Round(time.Millisecond))
	t.Logf("measure: kill-margin-ms=%d (expected ≈ 1400)", margin.Milliseconds())
}

// The leader is SIGKILLed (no release): its lease runs out on the server and
// the waiter takes over, never before the TTL counted from the leader's last
// renewal, and about one poll after it.
func TestAzureLeaderKilledFailover(t *testing.T) {
	t.Parallel()
	_, store := azShared(t, "poll=200ms")
	env := append(azEnv(azDevKey), "LEADERRUN_STORE="+store)
	leader, child := holdLease(t, env, "crash", "-v", "--log-format", "json", "--renew-every", "1s")
	waitStderr(t, leader, `"event":"renewed"`, 10*time.Second)
	waiter := start(t, env, "--name", "crash", "--", "date", "+%s%N")
	waitStderr(t, waiter, "waiting", 10*time.Second)
	_ = leader.cmd.Process.Kill()
	killed := time.Now()
	leader.wait()
	waitGone(t, child, time.Second)
	ns, err := strconv.ParseInt(waiter.line(), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	started := time.Unix(0, ns)
	if c := waiter.wait(); c != 0 {
		t.Fatalf("waiter exit %d: %s", c, waiter.stderr.String())
	}
	sent := renewalsSent(t, leader)
	if len(sent) == 0 {
		t.Fatal("no renewed event from the leader")
	}
	after := started.Sub(sent[len(sent)-1])
	if after < azTTL {
		t.Fatalf("the waiter's child started %v after the dead leader's last renewal was sent; the lease was still valid (ttl %v)", after, azTTL)
	}
	t.Logf("measure: failover-after-kill-ms=%d failover-after-last-renewal-ms=%d (ttl 15000 + poll 200-400ms)",
		started.Sub(killed).Milliseconds(), after.Milliseconds())
}

// A clean exit hands the lease over to a waiting instance, with the default
// poll interval and with ?poll=200ms; the delay is from the leader's child
// being told to exit to the waiter's child running.
func TestAzureCleanHandover(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, query string
		bound       time.Duration
	}{
		{"default-poll", "", 2*time.Second + time.Second}, // poll 1s + up to 1s of jitter, and slack
		{"poll-200ms", "poll=200ms", 400*time.Millisecond + time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, store := azShared(t, tc.query)
			env := append(azEnv(azDevKey), "LEADERRUN_STORE="+store)
			d, _ := handoverOnce(t, env, "handover")
			if d > tc.bound {
				t.Errorf("handover took %v; want at most %v", d, tc.bound)
			}
			t.Logf("measure: handover-ms=%d", d.Milliseconds())
		})
	}
}

// An Azure TTL that is not a whole number of seconds from 15s to 60s is
// refused locally: exit 125, one line about --ttl, no child, and no
// connection to the store (the URL points at a listener that counts them).
func TestAzureInvalidTTL(t *testing.T) {
	t.Parallel()
	requireEnv(t, "LEADERRUN_TEST_AZURITE")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	store := "azblob+http://" + ln.Addr().String() + "/" + azAccount + "/lrttl"
	marker := filepath.Join(t.TempDir(), "started")
	for _, ttl := range []string{"10s", "14s", "61s", "15500ms", "1m0s500ms"} {
		t0 := time.Now()
		code, stderr := runLR(t, azEnv(azDevKey), "--store", store, "--ttl", ttl, "--", "touch", marker)
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		if code != 125 || len(lines) != 1 || !strings.Contains(lines[0], "--ttl") {
			t.Errorf("--ttl %s: exit %d, stderr %q; want 125 and one line about --ttl", ttl, code, stderr)
		}
		for _, net := range []string{"dial", "refused", "unavailable", "no answer", "HTTP"} {
			if strings.Contains(lines[0], net) {
				t.Errorf("--ttl %s: the message is about the network (%q), not the TTL: %q", ttl, net, lines[0])
			}
		}
		if took := time.Since(t0); took > 5*time.Second {
			t.Errorf("--ttl %s: took %v to refuse", ttl, took)
		}
		t.Logf("--ttl %s: %s", ttl, lines[0])
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child was started")
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("%d connection(s) to the store; want none", n)
	}
}

// azSecretForms returns the forms in which secret might leak: itself, URL-
// escaped, and long enough pieces of it.
func azSecretForms(secret string) []string {
	forms := []string{secret, url.QueryEscape(secret), url.PathEscape(secret)}
	if len(secret) >= 24 {
		forms = append(forms, secret[:12], secret[len(secret)-12:], secret[len(secret)/2-6:len(secret)/2+6])
	}
	return forms
}

func azAssertNoSecret(t *testing.T, what, out string, secrets ...string) {
	t.Helper()
	for _, s := range secrets {
		for _, f := range azSecretForms(s) {
			if strings.Contains(out, f) {
				t.Errorf("%s shows the secret (%q): %s", what, f, out)
			}
		}
	}
}

// azStatus runs `leaderrun status ARGS` and returns its exit code, stdout and stderr.
func azStatus(t *testing.T, env []string, args ...string) (int, string, string) {
	t.Helper()
	return runLROut(t, env, append([]string{"status"}, args...)...)
}

// Keys and SAS signatures never appear in stderr or status output: a wrong
// key (refused: exit 125, one line), the right key at -v in text and json, a
// working account SAS in the URL, and a forged one.
func TestAzureSecretsNotShown(t *testing.T) {
	t.Parallel()
	ep, _ := azShared(t, "")
	wrongKey := base64.StdEncoding.EncodeToString([]byte("not-the-devstoreaccount1-key-but-valid-base64!"))
	marker := filepath.Join(t.TempDir(), "started")

	t.Run("wrong key", func(t *testing.T) {
		t.Parallel()
		store := azStoreURL(ep, azContainer(), "")
		for _, format := range []string{"text", "json"} {
			code, stderr := runLR(t, azEnv(wrongKey), "--store", store, "--log-format", format, "--", "touch", marker)
			lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
			if code != 125 || len(lines) != 1 || !strings.Contains(stderr, "403") {
				t.Errorf("%s: exit %d, stderr %q; want 125 and one line saying access was denied (403)", format, code, stderr)
			}
			azAssertNoSecret(t, format+" stderr", stderr, wrongKey, azDevKey)
			code, _, stderr = azStatus(t, azEnv(wrongKey), "--store", store, "x")
			if code != 125 {
				t.Errorf("status with a wrong key: exit %d; want 125 (%s)", code, stderr)
			}
			azAssertNoSecret(t, "status stderr", stderr, wrongKey, azDevKey)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the child was started")
		}
	})

	t.Run("right key verbose", func(t *testing.T) {
		t.Parallel()
		store := azStoreURL(ep, azContainer(), "")
		for _, format := range []string{"text", "json"} {
			code, stderr := runLR(t, azEnv(azDevKey), "-v", "--store", store, "--log-format", format, "--name", "k", "--", "true")
			if code != 0 {
				t.Fatalf("%s: exit %d: %s", format, code, stderr)
			}
			azAssertNoSecret(t, format+" stderr", stderr, azDevKey)
		}
		leader, _ := holdLease(t, append(azEnv(azDevKey), "LEADERRUN_STORE="+store), "k")
		for _, args := range [][]string{{"--store", store, "k"}, {"--json", "--store", store, "k"}} {
			code, out, stderr := azStatus(t, azEnv(azDevKey), args...)
			if code != 0 {
				t.Fatalf("status %v: exit %d: %s%s", args, code, out, stderr)
			}
			azAssertNoSecret(t, "status output", out+stderr, azDevKey)
		}
		_ = leader.cmd.Process.Signal(syscall.SIGTERM)
		leader.wait()
	})

	t.Run("account SAS", func(t *testing.T) {
		t.Parallel()
		cred, err := blob.NewSharedKeyCredential(azAccount, azDevKey)
		if err != nil {
			t.Fatal(err)
		}
		perms := sas.AccountPermissions{Read: true, Write: true, Create: true, Add: true, List: true}
		qp, err := sas.AccountSignatureValues{
			Protocol:      sas.ProtocolHTTPSandHTTP,
			ExpiryTime:    time.Now().Add(time.Hour).UTC(),
			Permissions:   perms.String(),
			ResourceTypes: (&sas.AccountResourceTypes{Service: true, Container: true, Object: true}).String(),
		}.SignWithSharedKey(cred)
		if err != nil {
			t.Fatal(err)
		}
		sig := qp.Signature()
		store := azStoreURL(ep, azContainer(), qp.Encode())
		noKey := azEnv("") // the SAS is the only credential
		for _, format := range []string{"text", "json"} {
			code, stderr := runLR(t, noKey, "-v", "--store", store, "--log-format", format, "--name", "s", "--", "true")
			if code != 0 {
				t.Fatalf("%s with an account SAS: exit %d: %s", format, code, stderr)
			}
			if !strings.Contains(stderr, "SAS token from the store URL") {
				t.Errorf("%s: -v does not say the URL's SAS is used: %s", format, stderr)
			}
			azAssertNoSecret(t, format+" stderr", stderr, sig)
		}
		leader, _ := holdLease(t, append(noKey, "LEADERRUN_STORE="+store), "s")
		for _, args := range [][]string{{"--store", store, "s"}, {"--json", "--store", store, "s"}} {
			code, out, stderr := azStatus(t, noKey, args...)
			if code != 0 {
				t.Fatalf("status %v: exit %d: %s%s", args, code, out, stderr)
			}
			azAssertNoSecret(t, "status output", out+stderr, sig)
		}
		_ = leader.cmd.Process.Signal(syscall.SIGTERM)
		leader.wait()

		// A forged signature: refused with one line that does not quote it.
		forged := base64.StdEncoding.EncodeToString([]byte("forged-signature-forged-signature"))
		bad := strings.Replace(qp.Encode(), "sig="+url.QueryEscape(sig), "sig="+url.QueryEscape(forged), 1)
		if bad == qp.Encode() {
			t.Fatalf("could not find sig= in %s", qp.Encode())
		}
		code, stderr := runLR(t, noKey, "--store", azStoreURL(ep, azContainer(), bad), "--", "touch", marker)
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		if code != 125 || len(lines) != 1 {
			t.Errorf("forged SAS: exit %d, stderr %q; want 125 and one line", code, stderr)
		}
		azAssertNoSecret(t, "forged SAS stderr", stderr, forged, sig)
		if _, err := os.Stat(marker); err == nil {
			t.Error("the child was started")
		}
	})
}

// status --json: nothing known (exit 4) before the container exists, holder
// and token while held (exit 0), free (exit 3) after the leader released it.
func TestAzureStatus(t *testing.T) {
	t.Parallel()
	_, store := azShared(t, "")
	env := append(azEnv(azDevKey), "LEADERRUN_STORE="+store)
	if code, m := statusJSON(t, env, "st"); code != 4 || m["held"] != false || m["unknown"] != true {
		t.Fatalf("status of a lease in a missing container: %d %v; want 4, held=false, unknown=true", code, m)
	}
	leader, _ := holdLease(t, env, "st", "--holder", "web-2:4411")
	code, m := statusJSON(t, env, "st")
	first, _ := m["token"].(float64) // JSON: exact, tokens are below 2^53
	if code != 0 || m["held"] != true || m["holder"] != "web-2:4411" || first <= 0 || m["since"] == nil {
		t.Fatalf("status while held: %d %v; want 0, holder web-2:4411, a token", code, m)
	}
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	leader.wait()
	if code, m := statusJSON(t, env, "st"); code != 3 || m["held"] != false {
		t.Fatalf("status after release: %d %v; want 3 and held=false", code, m)
	}
	// The next holder gets a greater token.
	leader, _ = holdLease(t, env, "st", "--holder", "web-3")
	if code, m := statusJSON(t, env, "st"); code != 0 || m["holder"] != "web-3" || !(tokenOf(m) > first) {
		t.Fatalf("status of the second holder: %d %v; want holder web-3, a token above %.0f", code, m, first)
	}
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	leader.wait()
}

// tokenOf reads the token of a status --json answer (0 when missing).
func tokenOf(m map[string]any) float64 {
	f, _ := m["token"].(float64)
	return f
}
