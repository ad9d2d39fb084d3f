package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ---- PostgreSQL ----

// newPgFaults injects faults into the server scripts/postgres.sh started
// in c.pgDir. The server is the postmaster and its children, each backend
// in a session of its own, so a pause or kill reaches each of them. A
// kill, as a crash, loses no committed row (WAL replay).
func newPgFaults(d *driver) (storeFaults, error) {
	s, env, err := newScriptServer(d, serverSpec{store: "postgres", flag: "pg", dir: d.c.pgDir,
		script: filepath.Join(d.c.pgScripts, "postgres.sh"), proc: "postgres",
		pidVar: "LEADERRUN_TEST_POSTGRES_PID", addrVar: "LEADERRUN_TEST_POSTGRES_URL", addrIs: "URL", tree: true})
	if err != nil {
		return nil, err
	}
	u := env["LEADERRUN_TEST_POSTGRES_URL"]
	return &serverFaults{scriptServer: s, keyKinds: []string{"key_delete"}, key: func(ctx context.Context, kind string) error {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		c, err := pgx.Connect(cctx, u)
		if err != nil {
			return fmt.Errorf("connect: %w", err) // pgx's message holds no password
		}
		defer c.Close(context.Background())
		return d.changeTokens(kind, func() ([]uint64, error) {
			rows, err := c.Query(cctx, "DELETE FROM leaderrun_leases WHERE name = $1 RETURNING coalesce(token, 0)", d.c.name)
			if err != nil {
				return nil, err
			}
			tokens, err := pgx.CollectRows(rows, pgx.RowTo[int64])
			var out []uint64
			for _, t := range tokens {
				if t > 0 {
					out = append(out, uint64(t))
				}
			}
			return out, err
		})
	}}, nil
}

// signalTree sends sig to pid and its children, stopping pid first so it
// forks no new child meanwhile.
func signalTree(pid int, sig syscall.Signal) {
	_ = syscall.Kill(pid, syscall.SIGSTOP)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		n, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if f := strings.Fields(s[i+1:]); i >= 0 && len(f) > 1 && f[1] == strconv.Itoa(pid) {
			_ = syscall.Kill(n, sig)
		}
	}
	_ = syscall.Kill(pid, sig)
	if sig != syscall.SIGSTOP {
		_ = syscall.Kill(pid, syscall.SIGCONT)
	}
}
