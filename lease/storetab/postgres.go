package storetab

import "time"

// postgres is the PostgreSQL store: a row per lease.
var postgres = Row{
	Name:       "PostgreSQL",
	Schemes:    []string{"postgres", "postgresql"},
	Form:       "postgres://user@host/db",
	Program:    "leaderrun-postgres",
	Package:    "github.com/leaderrun/leaderrun/lease/pglease",
	Port:       5432,
	Expires:    true,
	MinTTL:     100 * time.Millisecond,
	TTLUnit:    time.Millisecond,
	Step:       250 * time.Millisecond,
	SecretVars: []string{"PGPASSWORD"},
}
