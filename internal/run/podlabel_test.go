package run

import (
	"errors"
	"testing"
)

// --pod-label takes a label by Kubernetes' rules, and refuses, as a usage
// error, what the API server would refuse only once the child ran.
func TestParsePodLabel(t *testing.T) {
	for in, want := range map[string]PodLabel{
		"leader=true":                 {"leader", "true"},
		"leaderrun/leader=yes":        {"leaderrun/leader", "yes"},
		"app.example.com/role=lead_1": {"app.example.com/role", "lead_1"},
		"role=":                       {"role", ""},
	} {
		if got, err := ParsePodLabel(in, nil); err != nil || got != want {
			t.Errorf("ParsePodLabel(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"leader", "=x", "-role=x", "role=-x", "Bad_Prefix/role=x", "role=has space", "role=" + string(make([]byte, 64)), "a/b/c=x"} {
		if _, err := ParsePodLabel(bad, nil); !errors.Is(err, ErrUsage) {
			t.Errorf("ParsePodLabel(%q) = %v; want a usage error", bad, err)
		}
	}
}
