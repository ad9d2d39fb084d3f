package storetab

import "time"

// kubernetes is the Kubernetes store: a Lease object per lease.
var kubernetes = Row{
	Name:    "Kubernetes",
	Schemes: []string{"kubernetes"},
	Form:    "kubernetes://NAMESPACE",
	Program: "leaderrun-kubernetes",
	Package: "github.com/leaderrun/leaderrun/lease/kubelease",
	Expires: true,
	MinTTL:  time.Second,
	TTLUnit: time.Second,
	Watches: true,
	Step:    200 * time.Millisecond,
}
