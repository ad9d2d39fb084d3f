#!/usr/bin/env bash
# scripts/bench-redis.sh measures leaderrun on Redis against the issue's
# targets, on this machine (scripts/bench.sh calls it at its end):
#   1. wrap overhead: `leaderrun --store redis://… -- true` vs plain `true`
#      vs `etcdctl lock NAME true` (hyperfine, medians; etcd is skipped when
#      the Debian packages etcd-server/etcd-client cannot be installed);
#   2. clean handover latency, p50/p90 (Go benchmark);           target ≤ 5 ms
#   3. crash failover (leader SIGKILLed → next child) / TTL, --ttl 2s;  ≤ 1.05
#   4. server SIGSTOPped → child dead, margin before the store's expiry ≥ 0.5 s
#      (the e2e test's MARGIN lines; TERM path and SIGKILL path);
#   5. Redis commands per second with 50 waiting instances (INFO
#      commandstats before/after, INFO itself not counted);        ≤ 5/s
#      over the first 10 s after all wait (the waiters still sleep their
#      first PTTL then), the next 20 s (steady state) and all 30 s.
# It starts its own redis-server (and etcd) on 127.0.0.1 and stops them by
# PID. Results go to stdout and bench-out/.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
need() { command -v "$1" >/dev/null || { apt-get install -y "$2" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "$2" >/dev/null; }; }; }
need hyperfine hyperfine
out=bench-out
mkdir -p "$out"
bin=$out/leaderrun
go build -o "$out/" . ./cmd/... # leaderrun and its store programs

work=$(mktemp -d /tmp/leaderrun-bench-redis.XXXXXX)
etcd_pid=
pids=()
cleanup() {
	local p
	for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
	if [ -n "$etcd_pid" ]; then
		kill -TERM "$etcd_pid" 2>/dev/null || true
		wait "$etcd_pid" 2>/dev/null || true
	fi
	scripts/redis.sh stop "$work/redis" || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

scripts/redis.sh start "$work/redis" single
set -a; . "$work/redis/env"; set +a
addr=$LEADERRUN_TEST_REDIS
port=${addr#*:}
store=redis://$addr

# etcd on 127.0.0.1 only, temp data dir, for the comparison (optional).
etcd_ep=
if command -v etcd >/dev/null && command -v etcdctl >/dev/null ||
	{ need etcd etcd-server && need etcdctl etcd-client && command -v etcd >/dev/null && command -v etcdctl >/dev/null; }; then
	ep=$((30000 + RANDOM % 5000))
	pp=$((ep + 5000))
	etcd --name bench --data-dir "$work/etcd" \
		--listen-client-urls "http://127.0.0.1:$ep" --advertise-client-urls "http://127.0.0.1:$ep" \
		--listen-peer-urls "http://127.0.0.1:$pp" --initial-advertise-peer-urls "http://127.0.0.1:$pp" \
		--initial-cluster "bench=http://127.0.0.1:$pp" \
		>"$work/etcd.log" 2>&1 &
	etcd_pid=$!
	for _ in $(seq 1 100); do
		if ETCDCTL_API=3 etcdctl --endpoints="127.0.0.1:$ep" endpoint health >/dev/null 2>&1; then
			etcd_ep=127.0.0.1:$ep
			break
		fi
		sleep 0.1
	done
	[ -n "$etcd_ep" ] || echo "   (etcd did not come up; skipping it: $(tail -1 "$work/etcd.log"))"
else
	echo "   (etcd-server/etcd-client not installable here: skipping the etcdctl lock comparison)"
fi

echo "== R1. wrap overhead (redis store)"
# `leaderrun --version` is in the set to split the overhead: process start-up
# and package initialisation of the binary vs the store work (dial, PING,
# acquire script, release script).
cmds=("true" "$bin --version" "$bin -q --store $store --name overhead -- true")
labels=("true" "leaderrun --version" "leaderrun redis")
if [ -n "$etcd_ep" ]; then
	cmds+=("etcdctl --endpoints=$etcd_ep lock overhead true")
	labels+=("etcdctl lock")
fi
ETCDCTL_API=3 hyperfine -N --warmup 20 --runs 300 --export-json "$out/redis-overhead.json" "${cmds[@]}" >/dev/null
python3 - "$out/redis-overhead.json" "${labels[@]}" <<'PY'
import json, sys
res = json.load(open(sys.argv[1]))["results"]
med = {lab: x["median"] * 1000 for lab, x in zip(sys.argv[2:], res)}
for k, v in med.items():
    print(f"   {k:20s} median {v:.3f} ms")
print(f"   leaderrun redis - true = {med['leaderrun redis'] - med['true']:.3f} ms   (target <= 3 ms)")
print(f"     of which start-up (--version - true) {med['leaderrun --version'] - med['true']:.3f} ms, store work {med['leaderrun redis'] - med['leaderrun --version']:.3f} ms")
if "etcdctl lock" in med:
    print(f"   leaderrun redis / etcdctl lock = {med['leaderrun redis'] / med['etcdctl lock']:.2f}x")
PY

echo "== R2. clean handover (redis, pub/sub wake-up)"
go test -run '^$' -bench 'BenchmarkRedisHandover' -benchtime 30x ./e2e | tee "$out/redis-handover.txt" | grep -E '^Benchmark' | sed 's/^/   /'

echo "== R3. crash failover, --ttl 2s (leader SIGKILLed -> next child)"
go test -run '^$' -bench 'BenchmarkRedisFailover' -benchtime 5x ./e2e | tee "$out/redis-failover.txt" | grep -E '^Benchmark' | sed 's/^/   /'

echo "== R4. redis-server SIGSTOPped/SIGKILLed -> child dead, margin before the store's expiry (--ttl 3s --renew-every 500ms --grace 1s)"
go test -race=false -count=3 -v -run 'TestRedisServer(Frozen|Killed)StopsChild' ./e2e >"$out/redis-margin.txt" 2>&1 || { cat "$out/redis-margin.txt"; exit 1; }
grep -o 'MARGIN.*' "$out/redis-margin.txt" | sort | sed 's/^/   /'

echo "== R5. Redis commands/s with 50 waiting instances (default --ttl 15s)"
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
stats() { redis-cli -h 127.0.0.1 -p "$port" info commandstats | tr -d '\r'; }
stats >"$work/s0"
t0=$(date +%s.%N)
sleep 10
stats >"$work/s1"
t1=$(date +%s.%N)
sleep 20
stats >"$work/s2"
t2=$(date +%s.%N)
python3 - "$work/s0" "$work/s1" "$work/s2" "$t0" "$t1" "$t2" <<'PY' | tee "$out/redis-cmds.txt"
import sys
def load(p):
    d = {}
    for l in open(p):
        if l.startswith("cmdstat_"):
            k, v = l.strip().split(":", 1)
            d[k[8:]] = int(dict(x.split("=") for x in v.split(","))["calls"])
    return d
s = [load(p) for p in sys.argv[1:4]]
t = [float(x) for x in sys.argv[4:7]]
def rate(a, b, ta, tb):
    diff = {k: s[b].get(k, 0) - s[a].get(k, 0) for k in s[b] if k != "info"}
    diff = {k: v for k, v in diff.items() if v}
    n = sum(diff.values())
    return n / (tb - ta), n, tb - ta, diff
for name, a, b in (("first 10s", 0, 1), ("next 20s", 1, 2), ("all 30s", 0, 2)):
    r, n, dt, diff = rate(a, b, t[a], t[b])
    print(f"   {name:9s}: {n} commands in {dt:.1f}s = {r:.2f}/s (target <= 5/s)  {diff}")
    # commandstats also counts the commands a Lua script runs (GET, PTTL,
    # PEXPIRE inside acquire/renew). Round trips a client sent: scripts,
    # pings, (un)subscribes and the PTTL reads that are not inside a script
    # (a held acquire runs GET+PTTL, a renew GET+PEXPIRE).
    g = lambda k: diff.get(k, 0)
    rt = g("evalsha") + g("eval") + g("ping") + g("subscribe") + g("unsubscribe") + g("pttl") - (g("get") - g("pexpire"))
    print(f"   {'':9s}  client round trips {rt} = {rt / dt:.2f}/s")
PY
for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
pids=()
