package storetab

import "time"

// etcd is the etcd store: a key per lease on an etcd lease.
var etcd = Row{
	Name:       "etcd",
	Schemes:    []string{"etcd", "etcds"},
	Form:       "etcd://host:2379",
	Program:    "leaderrun-etcd",
	Package:    "github.com/leaderrun/leaderrun/lease/etcdlease",
	Port:       2379,
	Expires:    true,
	MinTTL:     2 * time.Second,
	TTLUnit:    time.Second,
	Step:       200 * time.Millisecond,
	SecretVars: []string{"ETCDCTL_USER", "ETCDCTL_PASSWORD"},
}
