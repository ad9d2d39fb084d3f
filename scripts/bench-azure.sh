#!/usr/bin/env bash
# scripts/bench-azure.sh measures leaderrun on the Azure Blob store against a
# private Azurite on 127.0.0.1 (started here with scripts/azurite.sh and
# stopped by PID on exit):
#   1. uncontended start → child's first instruction, and the Acquire part of it
#      (Go benchmark, p50/p90), plus one TryAcquire/Renew/Release in the store package;
#   2. clean handover with the default poll interval and with ?poll=200ms (p50/p90);
#   3. crash failover: leader SIGKILLed → the waiter's child starts (≈ TTL + poll);
#   4. margin between the child's death and the earliest possible lease expiry
#      when Azurite is SIGKILLed under a running leader (target ≥ 1s).
# 3 and 4 are the e2e tests TestAzureLeaderKilledFailover and
# TestAzureStoreKilledStopsChildBeforeExpiry run several times (each takes ~16s,
# as an Azure lease lasts at least 15s). Results go to stdout and bench-out/.
#   scripts/bench-azure.sh [RUNS]    RUNS of 3 and 4 (default 3)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
runs=${1:-3}
out=bench-out
mkdir -p "$out"
work=$(mktemp -d /tmp/leaderrun-bench-azure.XXXXXX)
cleanup() {
	[ -f "$work/env" ] && scripts/azurite.sh stop "$work" || true
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
scripts/azurite.sh start "$work"
set -a; . "$work/env"; set +a

metric() { # metric FILE NAME: the value reported before unit NAME
	awk -v n="$2" '{for (i = 2; i <= NF; i++) if ($i == n) print $(i-1)}' "$1" | head -1
}

echo "== azure 1. start → child (Azurite, blob exists)"
go test -run '^$' -bench 'BenchmarkAzureStartToChild' -benchtime 20x ./e2e >"$out/azure-start.txt"
go test -run '^$' -bench 'BenchmarkAcquireRelease' -benchtime 50x ./lease/bloblease >"$out/azure-tryacquire.txt"
f=$out/azure-start.txt
echo "   leaderrun start → child's first instruction  p50 $(metric "$f" start-to-child-ms-p50) ms  p90 $(metric "$f" start-to-child-ms-p90) ms"
echo "   of which Acquire (lease+read+metadata)       p50 $(metric "$f" acquire-ms-p50) ms  p90 $(metric "$f" acquire-ms-p90) ms"
echo "   of which acquired → child running           p50 $(metric "$f" acquired-to-child-ms-p50) ms  p90 $(metric "$f" acquired-to-child-ms-p90) ms"
f=$out/azure-tryacquire.txt
echo "   store package, mean per call: TryAcquire $(metric "$f" acquire-µs/op) µs, Renew $(metric "$f" renew-µs/op) µs, Release $(metric "$f" release-µs/op) µs"

echo "== azure 2. clean handover (10 tries each)"
go test -run '^$' -bench 'BenchmarkAzureHandover' -benchtime 10x ./e2e >"$out/azure-handover.txt"
for v in default-poll poll-200ms; do
	line=$(grep "BenchmarkAzureHandover/$v" "$out/azure-handover.txt" || true)
	[ -n "$line" ] || { echo "   $v: no result (see $out/azure-handover.txt)"; continue; }
	echo "$line" >"$work/line"
	target=""
	[ "$v" = default-poll ] && target="   (target: ≤ 1500 ms)"
	echo "   $v: p50 $(metric "$work/line" handover-ms-p50) ms  p90 $(metric "$work/line" handover-ms-p90) ms$target"
done

echo "== azure 3+4. crash failover and store-killed margin ($runs runs, ~20s each)"
LEADERRUN_TEST_AZURITE=$LEADERRUN_TEST_AZURITE go test -count "$runs" -v \
	-run 'TestAzure(LeaderKilledFailover|StoreKilledStopsChildBeforeExpiry)$' ./e2e >"$out/azure-failover.txt" 2>&1 ||
	{ tail -30 "$out/azure-failover.txt"; exit 1; }
summary() { # summary KEY: min/median/max of "measure: KEY=N" lines
	grep -o "$1=[0-9]*" "$out/azure-failover.txt" | cut -d= -f2 | sort -n |
		awk '{v[NR]=$1} END {if (NR) printf "min %d  median %d  max %d ms (n=%d)", v[1], v[int((NR+1)/2)], v[NR], NR; else printf "no result"}'
}
echo "   leader SIGKILLed → next child:        $(summary failover-after-kill-ms)"
echo "   last renewal sent → next child:       $(summary failover-after-last-renewal-ms)   (TTL 15000 + poll 200-400)"
echo "   Azurite killed: child death → expiry: $(summary kill-margin-ms)   (target ≥ 1000; expected ≈ 1400)"
