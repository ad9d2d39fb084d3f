package kubelease

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/leaderrun/leaderrun/lease/storetab/rowtest"
)

// TestRow holds the store table's Kubernetes row to this package, without
// an API server: the URL parser reads a kubeconfig that names one, and the
// store's limits and capabilities are its type's.
func TestRow(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: "https://127.0.0.1:6443"}
users:
- name: test
  user: {token: "not-a-secret"}
contexts:
- name: test
  context: {cluster: test, user: test}
current-context: test
`), 0o600); err != nil {
		t.Fatal(err)
	}
	rowtest.Check(t, "Kubernetes", rowtest.Facts{
		Schemes: Schemes,
		Accepts: func(scheme string) error {
			_, err := parseURL(scheme+"://default?kubeconfig="+kubeconfig, func(string) string { return "" })
			return err
		},
		Store: &Store{},
	})
}
