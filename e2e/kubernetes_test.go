package e2e

// Black-box tests of leaderrun on a real Kubernetes API server (leaderrun
// execs leaderrun-kubernetes for kubernetes:// URLs). Tests that only add
// Leases use the shared API server of scripts/test.sh
// (LEADERRUN_TEST_KUBECONFIG: its admin kubeconfig), each with its own
// lease names; tests that freeze or kill the API server start a private one
// with scripts/kubernetes.sh and stop it by PID.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/kubelease"
)

// kubeStore is the API server for the shared store tests
// (storefaults_test.go); its target is an admin kubeconfig.
var kubeStore = faultStore{
	envVar:      "LEADERRUN_TEST_KUBECONFIG",
	pidVar:      "LEADERRUN_TEST_KUBE_APISERVER_PID",
	storeURL:    func(kubeconfig string) string { return "kubernetes://default?kubeconfig=" + kubeconfig },
	script:      "scripts/kubernetes.sh",
	benchScript: "scripts/kubernetes.sh",
	wakeBy:      "its watch",
}

// kubectl runs kubectl with kubeconfig and returns its trimmed output.
func kubectl(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	cmd := exec.Command("kubectl", append([]string{"--kubeconfig", kubeconfig, "--namespace", "default"}, args...)...)
	return toolOutput(t, cmd)
}

// The shared store tests on Kubernetes (storefaults_test.go). A waiter is
// woken by its watch of the Lease object at a clean release, and judges a
// SIGKILLed leader gone when the record has not changed for a full TTL on
// its own clock. The token is the revision of the acquiring write.
func TestKubernetesManyInstancesNoOverlap(t *testing.T) { testManyInstances(t, kubeStore) }
func TestKubernetesNoWaitConflict(t *testing.T)         { testNoWaitConflict(t, kubeStore) }
func TestKubernetesCleanHandover(t *testing.T)          { testCleanHandover(t, kubeStore) }
func TestKubernetesLeaderKilledFailover(t *testing.T)   { testLeaderKilledFailover(t, kubeStore) }
func TestKubernetesTokensIncrease(t *testing.T)         { testTokensIncrease(t, kubeStore) }

// The API server frozen (SIGSTOP) or killed under a running leader: the
// child is dead before last_sent + TTL, the earliest a waiter may judge the
// lease expired; exit 124 (testServerFault).
func TestKubernetesServerFrozenStopsChild(t *testing.T) {
	t.Parallel()
	testServerFault(t, kubeStore, syscall.SIGSTOP, false)
}

func TestKubernetesServerKilledStopsChild(t *testing.T) {
	t.Parallel()
	testServerFault(t, kubeStore, syscall.SIGKILL, false)
}

// The Lease deleted, or its holder edited, with kubectl under a running
// leader: the child is stopped within one renew interval, exit 124
// (testRecordBroken).
func TestKubernetesLeaseDeletedStopsChild(t *testing.T) {
	t.Parallel()
	testRecordBroken(t, kubeStore, func(kubeconfig, name string) {
		kubectl(t, kubeconfig, "delete", "lease", kubelease.ObjectName(name))
	})
}

func TestKubernetesHolderEditedStopsChild(t *testing.T) {
	t.Parallel()
	testRecordBroken(t, kubeStore, func(kubeconfig, name string) {
		kubectl(t, kubeconfig, "patch", "lease", kubelease.ObjectName(name), "--type", "merge", "-p", `{"spec":{"holderIdentity":"intruder"}}`)
	})
}

// A user whose Role lacks update on leases: one line naming the missing
// verb and RBAC, exit 125 (bad configuration), no child.
func TestKubernetesNoUpdatePermission(t *testing.T) {
	t.Parallel()
	admin := requireEnv(t, "LEADERRUN_TEST_KUBECONFIG")
	limited := requireEnv(t, "LEADERRUN_TEST_KUBE_LIMITED_KUBECONFIG")
	role := `apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: leaderrun-no-update, namespace: default}
rules:
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch, create, delete]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: leaderrun-no-update, namespace: default}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leaderrun-no-update}
subjects:
- {kind: User, name: limited, apiGroup: rbac.authorization.k8s.io}
`
	f := filepath.Join(t.TempDir(), "role.yaml")
	if err := os.WriteFile(f, []byte(role), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, admin, "apply", "-f", f)
	marker := filepath.Join(t.TempDir(), "started")
	code, stderr := runLR(t, []string{"LEADERRUN_STORE=" + kubeStore.storeURL(limited)}, "--name", e2eName(t, "rbac"), "--", "touch", marker)
	line := strings.TrimSpace(stderr)
	if code != 125 || strings.Contains(line, "\n") || !strings.Contains(line, "update") || !strings.Contains(line, "RBAC") {
		t.Fatalf("exit %d, stderr %q; want 125 and one line naming the missing verb update and RBAC", code, stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child started")
	}
}

// Run history on Kubernetes: one of each outcome, history, status and
// check (testRunHistory); the lease broken by deleting its Lease.
func TestKubernetesRunHistory(t *testing.T) {
	t.Parallel()
	kc, env := kubeStore.shared(t)
	testRunHistory(t, env, e2eName(t, "hist"), "2s", func(name string) {
		kubectl(t, kc, "delete", "lease", kubelease.ObjectName(name))
	})
}

// history --format prom on Kubernetes says what history --json says
// (testHistoryProm, as on every store).
func TestKubernetesHistoryProm(t *testing.T) {
	t.Parallel()
	_, env := kubeStore.shared(t)
	testHistoryProm(t, env, e2eName(t, "hprom"))
}

// --once-per on Kubernetes, whose tokens are revisions, not clock readings.
func TestKubernetesOncePer(t *testing.T) {
	t.Parallel()
	_, env := kubeStore.shared(t)
	testOncePer(t, env, e2eName(t, "daily"), "2s", false)
}

func TestKubernetesSlots(t *testing.T) {
	t.Parallel()
	_, env := kubeStore.shared(t)
	testSlots(t, env, e2eName(t, "slotjob"), "2s")
}

func TestKubernetesStatusNothingKnown(t *testing.T) {
	t.Parallel()
	_, env := kubeStore.shared(t)
	statusNothingKnown(t, env)
}

// kubeShared is set when scripts/test.sh or the caller started an API
// server: the store lists of the tests that run on every store gain a
// "kubernetes" case then. scripts/test.sh starts it with the other servers
// once its binaries are cached; on a machine where they are still being
// built, its main phase runs without it, and its last phase runs those
// cases with -run 'TEST/^kubernetes$'.
var kubeShared = os.Getenv("LEADERRUN_TEST_KUBECONFIG") != ""

func init() {
	if kubeShared {
		healthStores = append(healthStores, healthStore{"kubernetes", func(t *testing.T) []string { _, env := kubeStore.shared(t); return env }})
	}
}

// kubeStandbyStores is the Kubernetes case of the standby tests
// (standbyStores), when an API server runs. A killed standby's object
// lapses three heartbeats (1 s each) after its last one.
func kubeStandbyStores() []standbyStore {
	if !kubeShared {
		return nil
	}
	return []standbyStore{{name: "kubernetes", delta: 200 * time.Millisecond, lapse: 10 * time.Second,
		setup: func(t *testing.T) ([]string, string, []string) {
			_, env := kubeStore.shared(t)
			return env, e2eName(t, "sb"), []string{"--ttl", "2s"}
		}}}
}

// BenchmarkKubernetesHandover is BenchmarkFileHandover on Kubernetes: the
// waiter is woken by its watch of the Lease object.
func BenchmarkKubernetesHandover(b *testing.B) {
	benchHandover(b, kubeStore.benchEnv(b))
}

// BenchmarkKubernetesFailover is benchFailover on Kubernetes: nobody
// expires the Lease; the waiter takes it over once the record has not
// changed for a whole TTL on its own clock.
func BenchmarkKubernetesFailover(b *testing.B) {
	benchFailover(b, kubeStore.benchEnv(b))
}

// The readiness probe of docs/kubernetes.md, as it is written there, in a
// leading and in a waiting replica: exit 0 and 1; and 1 again once the
// leader is gone.
func TestKubernetesReadinessProbe(t *testing.T) {
	t.Parallel()
	_, env := kubeStore.shared(t)
	name := strings.ToLower(e2eName(t, "probe"))
	probe := func(pod string) int {
		t.Helper()
		cmd := exec.Command("sh", "-c", `leaderrun status --json `+name+` | grep -q "\"held\":true,\"holder\":\"$POD_NAME\""`)
		cmd.Env = append(append(os.Environ(), env...), "POD_NAME="+pod, "PATH="+filepath.Dir(lrBin)+":"+os.Getenv("PATH"))
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case err == nil:
			return 0
		case errors.As(err, &ee):
			return ee.ExitCode()
		}
		t.Fatal(err)
		return -1
	}
	leader, _ := holdLease(t, append(env, "LEADERRUN_HOLDER=billing-7d9f-a"), name)
	if code := probe("billing-7d9f-a"); code != 0 {
		t.Fatalf("probe in the leading pod: exit %d; want 0", code)
	}
	if code := probe("billing-7d9f-b"); code != 1 {
		t.Fatalf("probe in a waiting pod: exit %d; want 1", code)
	}
	_ = leader.cmd.Process.Signal(syscall.SIGTERM)
	leader.wait()
	if code := probe("billing-7d9f-a"); code != 1 {
		t.Fatalf("probe after the leader released: exit %d; want 1", code)
	}
}

// The kubeconfig's token never shows on stderr or in status's output, in
// text or JSON logs, whether the API server takes it or refuses it (401:
// one line, exit 125).
func TestKubernetesTokenNeverPrinted(t *testing.T) {
	t.Parallel()
	admin := requireEnv(t, "LEADERRUN_TEST_KUBECONFIG")
	b, err := os.ReadFile(admin)
	if err != nil {
		t.Fatal(err)
	}
	var token string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "token: "); ok {
			token = v
		}
	}
	if len(token) < 16 {
		t.Fatalf("no token in %s", admin)
	}
	const wrong = "Wr0ng-s3cret-T0ken-0123456789"
	bad := filepath.Join(t.TempDir(), "wrong.kubeconfig")
	if err := os.WriteFile(bad, []byte(strings.ReplaceAll(string(b), token, wrong)), 0o600); err != nil {
		t.Fatal(err)
	}
	testSecretsNotPrinted(t, []string{token, wrong}, []secretCase{
		{"url", kubeStore.storeURL(admin), nil, true},
		{"env", "kubernetes://default", []string{"KUBECONFIG=" + admin}, true},
		{"url-wrong", kubeStore.storeURL(bad), nil, false},
		{"env-wrong", "kubernetes://default", []string{"KUBECONFIG=" + bad}, false},
	}, nil, func(t *testing.T) string { return e2eName(t, "tok") }, "true")
}

// A TTL that leaseDurationSeconds cannot say (not whole seconds): one
// line, exit 125, no child.
func TestKubernetesTTLRefused(t *testing.T) {
	t.Parallel()
	_, env := kubeStore.shared(t)
	marker := filepath.Join(t.TempDir(), "started")
	code, stderr := runLR(t, env, "--ttl", "2500ms", "--name", e2eName(t, "ttl"), "--", "touch", marker)
	if code != 125 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, "--ttl") {
		t.Fatalf("exit %d, stderr %q; want 125 and one line about --ttl", code, stderr)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the child started")
	}
}

// kubeAdmin runs kubectl as the admin of the shared API server, with no
// namespace of its own (the manifests name theirs), and returns its trimmed
// output.
func kubeAdmin(t *testing.T, args ...string) string {
	t.Helper()
	admin := requireEnv(t, "LEADERRUN_TEST_KUBECONFIG")
	return toolOutput(t, exec.Command("kubectl", append([]string{"--kubeconfig", admin}, args...)...))
}

// docManifest returns the YAML block of doc (a file under docs/) that
// contains every one of kinds, with namespace jobs replaced by ns.
func docManifest(t *testing.T, doc, ns string, kinds ...string) string {
	t.Helper()
	for _, b := range readmeParse(t, filepath.Join("docs", doc)) {
		text := strings.Join(b.body, "\n") + "\n"
		if b.info != "yaml" || slices.ContainsFunc(kinds, func(k string) bool { return !strings.Contains(text, "kind: "+k+"\n") }) {
			continue
		}
		if !strings.Contains(text, "namespace: jobs\n") {
			t.Fatalf("%s:%d: the manifest names no namespace jobs", b.file, b.line)
		}
		return strings.ReplaceAll(text, "namespace: jobs\n", "namespace: "+ns+"\n")
	}
	t.Fatalf("docs/%s has no YAML block with kinds %v", doc, kinds)
	return ""
}

// The Role and RoleBinding of docs/stores.md, applied as they are written
// (in a namespace of the test's own) to a real ServiceAccount: with a token
// of that service account leaderrun runs its child; with update taken out
// of the Role's verbs it refuses with one line naming the verb and RBAC,
// exit 125, no child. The Deployment of docs/kubernetes.md, with the
// ServiceAccount it names, and docs/listen.md's Deployment and Service
// (/leader as the readiness probe) pass the API server's own validation
// (server-side dry run: there is no kubelet here to run it).
func TestKubernetesDocsRole(t *testing.T) {
	t.Parallel()
	ns := "docs-rbac-" + strings.ToLower(lease.NewID()[:8])
	dir := t.TempDir()
	apply := func(manifest string, args ...string) {
		t.Helper()
		f := filepath.Join(dir, "manifest.yaml")
		if err := os.WriteFile(f, []byte(manifest), 0o600); err != nil {
			t.Fatal(err)
		}
		kubeAdmin(t, append([]string{"apply", "-f", f}, args...)...)
	}
	// The namespace stays: this API server has no controller that would
	// finish its deletion.
	kubeAdmin(t, "create", "namespace", ns)
	kubeAdmin(t, "create", "serviceaccount", "billing-worker", "--namespace", ns)
	role := docManifest(t, "stores.md", ns, "Role", "RoleBinding")
	if !strings.Contains(role, "name: billing-worker\n") {
		t.Fatalf("the RoleBinding of docs/stores.md binds no ServiceAccount billing-worker:\n%s", role)
	}
	apply(role)
	apply(docManifest(t, "kubernetes.md", ns, "ServiceAccount", "Deployment"), "--dry-run=server")
	apply(docManifest(t, "listen.md", ns, "Deployment", "Service"), "--dry-run=server") // /leader as the readiness probe

	kc := serviceAccountKubeconfig(t, dir, ns, "billing-worker")
	env := []string{"LEADERRUN_STORE=kubernetes://?kubeconfig=" + kc}

	marker := filepath.Join(dir, "ran")
	if code, stderr := runLR(t, env, "--name", "billing-worker", "--", "touch", marker); code != 0 {
		t.Fatalf("as the service account with the Role of docs/stores.md: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(marker); err != nil {
		t.Fatalf("the child did not run: %v", err)
	}

	noUpdate := strings.Replace(role, `"create", "update", "delete"`, `"create", "delete"`, 1)
	if noUpdate == role {
		t.Fatalf("the Role of docs/stores.md does not list the verbs as this test expects:\n%s", role)
	}
	apply(noUpdate)
	// RBAC changes reach the API server's authorizer through its informers,
	// a moment after the apply.
	deadline := time.Now().Add(15 * time.Second)
	for {
		marker := filepath.Join(dir, "ran-without-update")
		code, stderr := runLR(t, env, "--name", "billing-worker", "--", "touch", marker)
		line := strings.TrimSpace(stderr)
		if code == 125 {
			if strings.Contains(line, "\n") || !strings.Contains(line, "update") || !strings.Contains(line, "RBAC") {
				t.Fatalf("stderr %q; want one line naming the missing verb update and RBAC", stderr)
			}
			if _, err := os.Stat(marker); err == nil {
				t.Fatal("the child started")
			}
			return
		}
		if code != 0 || time.Now().After(deadline) {
			t.Fatalf("without update: exit %d, stderr %q; want 125", code, stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// --pod-label on the real API server (Pods without a kubelet stay Pending,
// and their labels can be patched): while the child runs, its Pod (POD_NAME)
// carries the label, and a previous holder's Pod no longer does; after the
// run the label is off. Elsewhere than Kubernetes, or for a Pod that does
// not exist, it is refused before anything starts (one line, 125).
func TestKubernetesPodLabel(t *testing.T) {
	t.Parallel()
	kc := requireEnv(t, "LEADERRUN_TEST_KUBECONFIG")
	ns := "podlabel-" + strings.ToLower(lease.NewID()[:8])
	kubeAdmin(t, "create", "namespace", ns) // stays: no controller here finishes a deletion
	pods := filepath.Join(t.TempDir(), "pods.yaml")
	var manifest strings.Builder
	manifest.WriteString("apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: default, namespace: " + ns + "}\n")
	for _, p := range []string{"web-0", "web-1"} {
		manifest.WriteString("---\napiVersion: v1\nkind: Pod\nmetadata: {name: " + p + ", namespace: " + ns + ", labels: {app: web}}\n" +
			"spec: {automountServiceAccountToken: false, containers: [{name: web, image: registry.example/web:1}]}\n")
	}
	if err := os.WriteFile(pods, []byte(manifest.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeAdmin(t, "apply", "-f", pods)
	kubeAdmin(t, "label", "pod", "web-1", "--namespace", ns, "role=leader") // a previous holder's, left behind
	label := func(pod string) string {
		t.Helper()
		return kubeAdmin(t, "get", "pod", pod, "--namespace", ns, "-o", "jsonpath={.metadata.labels.role}")
	}
	env := []string{"LEADERRUN_STORE=kubernetes://" + ns + "?kubeconfig=" + kc, "POD_NAME=web-0", "POD_NAMESPACE=" + ns}
	leader, release := leaderUntilStdin(t, env, "web", []string{"--pod-label", "role=leader"})
	// The label goes on in the background once the child runs; nothing
	// here is told when.
	for deadline := time.Now().Add(30 * time.Second); label("web-0") != "leader"; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("web-0 is not labelled role=leader 30s after its child started: %s", leader.stderr.String())
		}
	}
	if l := label("web-1"); l != "" {
		t.Fatalf("the previous holder's Pod web-1 still carries role=%s", l)
	}
	release()
	if c := leader.wait(); c != 0 {
		t.Fatalf("leader exited %d: %s", c, leader.stderr.String())
	}
	if l := label("web-0"); l != "" {
		t.Fatalf("web-0 still carries role=%s after its run ended", l)
	}

	for _, c := range []struct {
		env  []string
		want string
	}{
		{[]string{"LEADERRUN_STORE=" + fileStore(t)}, "needs the Kubernetes store"},
		{[]string{"LEADERRUN_STORE=kubernetes://" + ns + "?kubeconfig=" + kc, "POD_NAME=web-9", "POD_NAMESPACE=" + ns}, "no Pod web-9"},
	} {
		marker := filepath.Join(t.TempDir(), "ran")
		code, stderr := runLR(t, c.env, "--pod-label", "role=leader", "--name", "web-refused", "--", "touch", marker)
		if _, err := os.Stat(marker); code != 125 || !strings.Contains(stderr, c.want) || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || err == nil {
			t.Errorf("--pod-label with %v: exit %d, stderr %q, child ran: %v; want 125, one line saying %q, no child", c.env, code, stderr, err == nil, c.want)
		}
	}
}

// serviceAccountKubeconfig writes, in dir, a kubeconfig with a token of the
// ServiceAccount sa of namespace ns, on the shared server, and returns its
// path.
func serviceAccountKubeconfig(t *testing.T, dir, ns, sa string) string {
	t.Helper()
	token := kubeAdmin(t, "create", "token", sa, "--namespace", ns, "--duration", "1h")
	kc := filepath.Join(dir, sa+".kubeconfig")
	cfg := kubeAdmin(t, "config", "view", "--raw", "--minify", "-o", "jsonpath={.clusters[0].cluster.server} {.clusters[0].cluster.certificate-authority}")
	server, ca, _ := strings.Cut(cfg, " ")
	if err := os.WriteFile(kc, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, certificate-authority: %q}
users:
- name: %s
  user: {token: %q}
contexts:
- name: %s
  context: {cluster: test, user: %s, namespace: %s}
current-context: %s
`, server, ca, sa, token, sa, sa, ns, sa)), 0o600); err != nil {
		t.Fatal(err)
	}
	return kc
}

// The CronJob of docs/kubernetes.md, with its ServiceAccount, Role and
// RoleBinding, created as written (in a namespace of the test's own) on a
// real API server, which validates it (there is no controller here to
// start its Jobs); its container's command line, run as the ServiceAccount
// with the command replaced by one that leaves a mark, runs the command
// the first time and finds the day done the second.
func TestKubernetesDocsCronJob(t *testing.T) {
	t.Parallel()
	ns := "docs-cron-" + strings.ToLower(lease.NewID()[:8])
	dir := t.TempDir()
	kubeAdmin(t, "create", "namespace", ns) // stays: no controller would finish its deletion
	f := filepath.Join(dir, "cronjob.yaml")
	if err := os.WriteFile(f, []byte(docManifest(t, "kubernetes.md", ns, "ServiceAccount", "Role", "RoleBinding", "CronJob")), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeAdmin(t, "create", "-f", f)
	var command []string
	if err := json.Unmarshal([]byte(kubeAdmin(t, "get", "cronjob", "nightly-report", "--namespace", ns, "-o", "jsonpath={.spec.jobTemplate.spec.template.spec.containers[0].command}")), &command); err != nil {
		t.Fatal(err)
	}
	dash := slices.Index(command, "--")
	if len(command) < 2 || command[0] != "leaderrun" || dash < 0 || !slices.Contains(command, "--once-per") {
		t.Fatalf("the CronJob's command %q: want leaderrun … --once-per … -- COMMAND", command)
	}
	env := []string{"LEADERRUN_STORE=kubernetes://?kubeconfig=" + serviceAccountKubeconfig(t, dir, ns, "nightly-report")}
	run := func(marker string) (int, string) {
		args := append(slices.Clone(command[1:dash+1]), "touch", marker)
		return runLR(t, env, args...)
	}
	first := filepath.Join(dir, "first")
	// The RoleBinding reaches the API server's authorizer through its
	// informers, a moment after the create: until then, exit 125.
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		code, stderr := run(first)
		if code == 0 {
			break
		}
		if code != 125 || time.Now().After(deadline) {
			t.Fatalf("the CronJob's command line as its ServiceAccount: exit %d: %s", code, stderr)
		}
	}
	if _, err := os.Stat(first); err != nil {
		t.Fatalf("the first run did not start the command: %v", err)
	}
	second := filepath.Join(dir, "second")
	if code, stderr := run(second); code != 0 {
		t.Fatalf("the second run: exit %d: %s", code, stderr)
	}
	if _, err := os.Stat(second); err == nil {
		t.Error("the second run of the day started the command: --once-per day should have found the day done")
	}
}
