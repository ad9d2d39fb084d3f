package kubelease

import (
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/internal/storeurl"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// Schemes lists every URL scheme Open accepts.
var Schemes = []string{"kubernetes"}

// saDir is where Kubernetes mounts a pod's service-account credentials (a
// variable only so that the tests can play a pod).
var saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// config is a parsed store URL with its credentials resolved.
type config struct {
	namespace string
	display   string // the URL as given (it holds no secrets)
	where     string // "Kubernetes at https://HOST:PORT" for messages
	rest      *rest.Config
	secrets   []string // to mask in quoted library text
}

// parseURL reads kubernetes://[NAMESPACE][?context=NAME&kubeconfig=FILE]
// and finds credentials as kubectl does, with one difference in order: a
// pod's service account first (unless the URL names a context or a
// kubeconfig), then $KUBECONFIG, then ~/.kube/config. Without a NAMESPACE
// the pod's own namespace, or the context's, is used.
func parseURL(raw string, getenv func(string) string) (*config, error) {
	rest0, ok := strings.CutPrefix(raw, "kubernetes://")
	if !ok {
		return nil, storeerr.Config("not a kubernetes:// URL (want kubernetes://NAMESPACE)")
	}
	ns, rawQuery, _ := strings.Cut(rest0, "?")
	ns = strings.TrimSuffix(ns, "/")
	if ns != "" && !dnsLabel(ns) {
		return nil, storeerr.Config("kubernetes:// namespace %q is not a Kubernetes namespace name (lower-case letters, digits and '-', at most 63)", storeurl.SafeKey(ns))
	}
	q, err := storeurl.Query(rawQuery)
	if err != nil {
		return nil, storeerr.Config("kubernetes:// URL: %v", err)
	}
	for k := range q {
		if k != "context" && k != "kubeconfig" {
			return nil, storeerr.Config("kubernetes:// URL: unknown parameter %s (want context or kubeconfig)", storeurl.SafeKey(k))
		}
	}
	c := &config{namespace: ns, display: raw}
	kctx, kfile := q.Get("context"), q.Get("kubeconfig")
	if kctx == "" && kfile == "" && inCluster(getenv) {
		if err := c.inCluster(getenv); err != nil {
			return nil, err
		}
	} else if err := c.fromKubeconfig(kfile, kctx, getenv); err != nil {
		return nil, err
	}
	if c.namespace == "" {
		c.namespace = "default"
	}
	c.rest.QPS = -1 // no client-side rate limit: the keeper paces its calls
	c.rest.UserAgent = "leaderrun"
	c.where = "Kubernetes at " + c.rest.Host
	c.secrets = []string{c.rest.BearerToken, c.rest.Password}
	return c, nil
}

// inCluster reports whether this process runs in a pod with a service
// account mounted.
func inCluster(getenv func(string) string) bool {
	if getenv("KUBERNETES_SERVICE_HOST") == "" || getenv("KUBERNETES_SERVICE_PORT") == "" {
		return false
	}
	return fileExists(filepath.Join(saDir, "token"))
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// inCluster uses the pod's service account, as rest.InClusterConfig does
// (the API server at KUBERNETES_SERVICE_HOST:_PORT, the mounted token, which
// client-go reads again as the kubelet rotates it, and the mounted CA), but
// with getenv and saDir.
func (c *config) inCluster(getenv func(string) string) error {
	tokenFile := filepath.Join(saDir, "token")
	token, err := os.ReadFile(tokenFile)
	if err != nil {
		return storeerr.Config("the pod's service account cannot be used: %s", storeerr.FirstLine(err.Error()))
	}
	rc := &rest.Config{
		Host:            "https://" + net.JoinHostPort(getenv("KUBERNETES_SERVICE_HOST"), getenv("KUBERNETES_SERVICE_PORT")),
		BearerToken:     string(token),
		BearerTokenFile: tokenFile,
	}
	if ca := filepath.Join(saDir, "ca.crt"); fileExists(ca) {
		rc.TLSClientConfig.CAFile = ca
	}
	c.rest = rc
	if c.namespace == "" {
		if b, err := os.ReadFile(filepath.Join(saDir, "namespace")); err == nil {
			c.namespace = strings.TrimSpace(string(b))
		}
	}
	return nil
}

// fromKubeconfig loads file (or $KUBECONFIG's files, or ~/.kube/config)
// with context kctx (or the current one).
func (c *config) fromKubeconfig(file, kctx string, getenv func(string) string) error {
	rules := &clientcmd.ClientConfigLoadingRules{ExplicitPath: file}
	if file == "" {
		if env := getenv("KUBECONFIG"); env != "" {
			rules.Precedence = filepath.SplitList(env)
		} else if home := getenv("HOME"); home != "" {
			rules.Precedence = []string{filepath.Join(home, ".kube", "config")}
		}
	}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: kctx})
	rc, err := cc.ClientConfig()
	if err != nil {
		if clientcmd.IsEmptyConfig(err) {
			// client-go's own words advise KUBERNETES_MASTER, which
			// leaderrun does not read.
			return storeerr.Config("no usable Kubernetes credentials (%s): none found; run in a pod with a service account, or point KUBECONFIG at a kubeconfig file", sources(file, getenv))
		}
		return storeerr.Config("no usable Kubernetes credentials (%s): %s", sources(file, getenv), storeerr.FirstLine(storeerr.Redact(err.Error())))
	}
	c.rest = rc
	if c.namespace == "" {
		if ns, _, err := cc.Namespace(); err == nil {
			c.namespace = ns
		}
	}
	return nil
}

// sources names where credentials were looked for, for messages.
func sources(file string, getenv func(string) string) string {
	switch {
	case file != "":
		return "kubeconfig " + file
	case getenv("KUBECONFIG") != "":
		return "$KUBECONFIG"
	default:
		return "no service account, no $KUBECONFIG, ~/.kube/config"
	}
}

// dnsLabel reports whether s is an RFC 1123 label (a namespace name).
func dnsLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
