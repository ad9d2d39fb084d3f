package kubelease

import (
	"errors"
	"slices"
	"strings"

	"github.com/leaderrun/leaderrun/lease"
	authzv1 "k8s.io/api/authorization/v1"
)

// rulesReview asks what the user may do in namespace ns.
func rulesReview(ns string) *authzv1.SelfSubjectRulesReview {
	return &authzv1.SelfSubjectRulesReview{Spec: authzv1.SelfSubjectRulesReviewSpec{Namespace: ns}}
}

// missingVerbs returns the verbs of verbs that no rule grants on
// leases.coordination.k8s.io. A rule limited to some resourceNames counts:
// which names the user means to use is not known here.
func missingVerbs(rules []authzv1.ResourceRule) []string {
	var missing []string
	for _, v := range verbs {
		ok := false
		for _, r := range rules {
			if anyOf(r.Verbs, v) && anyOf(r.APIGroups, "coordination.k8s.io") && anyOf(r.Resources, "leases") {
				ok = true
				break
			}
		}
		if !ok {
			missing = append(missing, v)
		}
	}
	return missing
}

func anyOf(list []string, v string) bool {
	return slices.Contains(list, v) || slices.Contains(list, "*")
}

// joinVerbs writes "get, list or watch".
func joinVerbs(vs []string) string {
	if len(vs) == 1 {
		return vs[0]
	}
	return strings.Join(vs[:len(vs)-1], ", ") + " or " + vs[len(vs)-1]
}

func isUnavailable(err error) bool { return errors.Is(err, lease.ErrUnavailable) }
