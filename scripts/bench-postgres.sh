#!/usr/bin/env bash
# scripts/bench-postgres.sh measures leaderrun on PostgreSQL, on this machine
# (scripts/bench.sh calls it at its end):
#   1. wrap overhead: `leaderrun --store postgres://… -- true` vs plain
#      `true`, and the start-up of leaderrun-postgres alone (hyperfine,
#      medians);
#   2. clean handover latency, p50/p90 (Go benchmark; NOTIFY wake-up);
#   3. crash failover (leader SIGKILLed → next child) / TTL, --ttl 2s;
#   4. server frozen (SIGSTOP) or killed → child dead, margin before
#      the store's expiry (the e2e test's MARGIN lines);
#   5. statements per second the server runs for 50 waiting instances
#      (default --ttl 15s), counted in the server's statement log.
# It starts its own server with scripts/postgres.sh and stops it by PID.
# Results go to stdout and bench-out/. The password is never printed.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
command -v hyperfine >/dev/null || { apt-get install -y hyperfine >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y hyperfine >/dev/null; }; }
command -v psql >/dev/null || { apt-get install -y postgresql-client >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y postgresql-client >/dev/null; }; }
out=bench-out
mkdir -p "$out"
bin=$out/leaderrun
go build -o "$out/" . ./cmd/... # leaderrun and its store programs

work=$(mktemp -d /tmp/leaderrun-bench-pg.XXXXXX)
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	scripts/postgres.sh stop "$work/pg" || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

scripts/postgres.sh start "$work/pg"
set -a; . "$work/pg/env"; set +a
store=$LEADERRUN_TEST_POSTGRES_URL
log=$(cat "$work/pg/rundir")/server.log
hide() { sed -e 's#://\([^:/@]*\):[^@]*@#://\1:xxxxx@#g'; }

echo "== P1. wrap overhead (postgres store)"
hyperfine -N --warmup 10 --runs 100 --export-json "$work/overhead.json" \
	"true" "$out/leaderrun-postgres --version" "$bin -q --store $store --name overhead -- true" >/dev/null
python3 - "$work/overhead.json" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
med = {lab: x["median"] * 1000 for lab, x in zip(["true", "leaderrun-postgres --version", "leaderrun postgres"], res)}
for k, v in med.items():
    print(f"   {k:30s} median {v:.3f} ms")
print(f"   leaderrun postgres - true = {med['leaderrun postgres'] - med['true']:.3f} ms")
print(f"     of which start-up (--version - true) {med['leaderrun-postgres --version'] - med['true']:.3f} ms, store work (connect, login, acquire, release) {med['leaderrun postgres'] - med['leaderrun-postgres --version']:.3f} ms")
PY
cp "$work/overhead.json" "$out/postgres-overhead.json.tmp" && hide <"$out/postgres-overhead.json.tmp" >"$out/postgres-overhead.json" && rm -f "$out/postgres-overhead.json.tmp"

echo "== P2. clean handover (NOTIFY wake-up)"
go test -run '^$' -bench 'BenchmarkPostgresHandover' -benchtime 30x ./e2e 2>&1 | hide | tee "$out/postgres-handover.txt" | grep -E '^Benchmark' | sed 's/^/   /'

echo "== P3. crash failover, --ttl 2s (leader SIGKILLed -> next child)"
go test -run '^$' -bench 'BenchmarkPostgresFailover' -benchtime 5x ./e2e 2>&1 | hide | tee "$out/postgres-failover.txt" | grep -E '^Benchmark' | sed 's/^/   /'

echo "== P4. server SIGSTOPped/SIGKILLed -> child dead, margin before the store's expiry (--ttl 3s --renew-every 500ms --grace 1s)"
go test -count=3 -v -run 'TestPostgresServerFaultStopsChild' ./e2e 2>&1 | hide >"$out/postgres-margin.txt" || { cat "$out/postgres-margin.txt"; exit 1; }
grep -o 'MARGIN.*' "$out/postgres-margin.txt" | sort | sed 's/^/   /'

echo "== P5. statements/s with 50 waiting instances (default --ttl 15s)"
psql -qAt "$store" -c "ALTER SYSTEM SET log_statement = 'all'" -c "SELECT pg_reload_conf()" >/dev/null
"$bin" -q --store "$store" --name crowd -- sleep 600 &
pids+=($!)
sleep 0.5 # let the holder take the lease first (it prints nothing with -q)
for i in $(seq 1 50); do
	"$bin" --store "$store" --name crowd -- true 2>"$work/w$i.err" &
	pids+=($!)
done
for _ in $(seq 1 300); do
	[ "$(grep -l waiting "$work"/w*.err 2>/dev/null | wc -l)" -eq 50 ] && break
	sleep 0.1
done
[ "$(grep -l waiting "$work"/w*.err | wc -l)" -eq 50 ] || { echo "not all 50 waiters are waiting" >&2; exit 1; }
count() { grep -cE 'LOG:  (statement|execute [^:]*):' "$log" || true; }
conns=$(psql -qAt "$store" -c "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'leaderrun'")
c0=$(count); t0=$(date +%s.%N)
sleep 30
c1=$(count); t1=$(date +%s.%N)
psql -qAt "$store" -c "ALTER SYSTEM RESET log_statement" -c "SELECT pg_reload_conf()" >/dev/null
python3 - "$c0" "$c1" "$t0" "$t1" "$conns" <<'PY' | tee "$out/postgres-statements.txt"
import sys
c0, c1, t0, t1, conns = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
print(f"   {c1 - c0} statements in {t1 - t0:.1f}s = {(c1 - c0) / (t1 - t0):.2f}/s (holder's renewals included); {conns} connections")
PY
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
