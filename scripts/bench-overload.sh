#!/usr/bin/env bash
# scripts/bench-overload.sh measures the safety margin under overload: the
# time between the death of a leader's child (the kernel's pidfd wake-up,
# CLOCK_BOOTTIME) and the lease's expiry in Redis (PEXPIRETIME and TIME),
# when Redis stops applying writes after the first confirmed renewal, so
# only leaderrun's own deadline (SIGKILL at E − 250 ms) can stop the child,
# which ignores SIGTERM and spins on the CPU (e2e BenchmarkOverloadMargin,
# --ttl 2s --renew-every 500ms --grace 300ms). One row per condition:
#   none      nothing added (the machine as it is: say how busy it was);
#   cpu8x     stress-ng --cpu 8×cores beside it;
#   cpumax5   leaderrun, its guard and the child in one cgroup limited to 5 %
#             of a core (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us), as a
#             Kubernetes CPU limit or systemd's CPUQuota=5% sets it (cpumaxN:
#             N %; not in the default rows).
# Each row: trials, smallest and median margin, trials in which the child
# outlived the lease (must be 0). Needs root for the cgroup row (skipped
# otherwise) and stress-ng for the stress row.
#
#   scripts/bench-overload.sh [TRIALS] [ROW...]     (default 100, every row)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
trials=${1:-100}
shift || true
rows=("$@")
[ ${#rows[@]} -gt 0 ] || rows=(none cpu8x cpumax5)
out=bench-out
mkdir -p "$out"
work=$(mktemp -d /tmp/leaderrun-overload.XXXXXX)
stress_pid=
cg=
cleanup() {
	[ -z "$stress_pid" ] || kill "$stress_pid" 2>/dev/null || true
	[ -z "$cg" ] || rmdir "$cg" 2>/dev/null || true
	scripts/redis.sh stop "$work/redis" >/dev/null 2>&1 || true
	rm -rf "$work"
}
trap cleanup EXIT
# The benchmark starts a private server of its own; the shared one only
# says that Redis is there.
mkdir -p "$work/redis"
scripts/redis.sh start "$work/redis" single >/dev/null
set -a
. "$work/redis/env"
set +a

# cpu_cgroup PCT creates a cgroup limited to PCT % of one core and prints
# its directory.
cpu_cgroup() {
	local pct=$1 dir
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then # v2
		dir=/sys/fs/cgroup/leaderrun-overload-$$
		echo +cpu >/sys/fs/cgroup/cgroup.subtree_control 2>/dev/null || true
		mkdir "$dir"
		echo "$((pct * 1000)) 100000" >"$dir/cpu.max"
	else # v1
		dir=/sys/fs/cgroup/cpu/leaderrun-overload-$$
		mkdir "$dir"
		echo 100000 >"$dir/cpu.cfs_period_us"
		echo $((pct * 1000)) >"$dir/cpu.cfs_quota_us"
	fi
	echo "$dir"
}

cores=$(nproc)
echo "== overload margin: $trials trials a row, $cores cores, $(uname -r)"
printf '   %-8s %7s %10s %12s %9s  %s\n' row trials min-ms median-ms outlived "load (1 min) before → after"
for row in "${rows[@]}"; do
	unset LEADERRUN_BENCH_CGROUP LEADERRUN_BENCH_TTL
	case $row in
	none) ;;
	cpu8x)
		command -v stress-ng >/dev/null || { echo "   $row: no stress-ng"; continue; }
		stress-ng --cpu $((8 * cores)) --timeout 3600s >/dev/null 2>&1 &
		stress_pid=$!
		sleep 5
		;;
	cpumax[0-9]*)
		cg=$(cpu_cgroup "${row#cpumax}" 2>/dev/null) || { echo "   $row: cannot create a cgroup here (root and a writable cgroup fs are needed)"; cg=; continue; }
		export LEADERRUN_BENCH_CGROUP=$cg
		# The limit's stall adds to the kill bound (leaderrun refuses
		# --ttl 2s under it): a TTL that fits every limit measured.
		export LEADERRUN_BENCH_TTL=4s
		;;
	*)
		echo "unknown row $row" >&2
		exit 2
		;;
	esac
	before=$(cut -d' ' -f1 /proc/loadavg)
	go test -v -run '^$' -bench 'BenchmarkOverloadMargin' -benchtime "${trials}x" -timeout 3h ./e2e >"$out/overload-$row.txt" 2>&1 || true
	after=$(cut -d' ' -f1 /proc/loadavg)
	line=$(grep -E '^BenchmarkOverloadMargin' "$out/overload-$row.txt" | tail -1 || true)
	if [ -z "$line" ]; then
		echo "   $row: no result (see $out/overload-$row.txt)"
	else
		metric() { awk -v m="$1" '{for (i = 2; i <= NF; i++) if ($i == m) print $(i-1)}' <<<"$line"; }
		printf '   %-8s %7s %10s %12s %9s  %s → %s\n' "$row" "$trials" "$(metric margin-ms-min)" "$(metric margin-ms-median)" "$(metric outlived)" "$before" "$after"
	fi
	if [ -n "$stress_pid" ]; then
		kill "$stress_pid" 2>/dev/null || true
		wait "$stress_pid" 2>/dev/null || true
		stress_pid=
	fi
	if [ -n "$cg" ]; then
		rmdir "$cg" 2>/dev/null || true
		cg=
	fi
done
