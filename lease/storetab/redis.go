package storetab

import "time"

// redis is the Redis store (also Valkey), alone, behind Sentinel or a
// cluster, each in plain text or TLS.
var redis = Row{
	Name:       "Redis",
	Schemes:    []string{"redis", "rediss", "unix", "redis+sentinel", "rediss+sentinel", "redis+cluster", "rediss+cluster"},
	Form:       "redis://host:port",
	Program:    "leaderrun-redis",
	Package:    "github.com/leaderrun/leaderrun/lease/redislease",
	Port:       6379,
	Expires:    true,
	MinTTL:     100 * time.Millisecond,
	TTLUnit:    time.Millisecond,
	Watches:    true,
	Step:       200 * time.Millisecond,
	SecretVars: []string{"REDISCLI_AUTH", "LEADERRUN_REDIS_SENTINEL_PASSWORD"},
}
