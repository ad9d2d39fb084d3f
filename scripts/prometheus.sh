#!/usr/bin/env bash
# Start and stop a private Prometheus server on 127.0.0.1 for tests: the
# monitoring of docs/listen.md, scraping the --listen /metrics of
# leaderrun instances.
#
#   scripts/prometheus.sh start DIR RULES TARGET...
#                                  start Prometheus (Debian's package, extracted
#                                  into .tools/bin when it is not installed: the
#                                  package would start a service) on a free
#                                  127.0.0.1 port, scraping each 127.0.0.1:PORT
#                                  TARGET every 250 ms and evaluating the rule file
#                                  RULES ("" for none) as often, wait until it is
#                                  ready, and write DIR/env:
#                                    LEADERRUN_TEST_PROMETHEUS=127.0.0.1:PORT
#                                    LEADERRUN_TEST_PROMETHEUS_PID=PID
#                                  and DIR/pids.
#   scripts/prometheus.sh stop DIR stop the server recorded in DIR/env, by its PID only
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

start() {
	local dir=$1 rules=$2 port pid i t targets=""
	shift 2
	have prometheus || apt_extract prometheus prometheus
	mkdir -p "$dir/data"
	for t in "$@"; do
		targets+="${targets:+, }'$t'"
	done
	free_port 20000 20000
	{
		printf 'global:\n  scrape_interval: 250ms\n  scrape_timeout: 200ms\n  evaluation_interval: 250ms\n'
		[ -z "$rules" ] || printf 'rule_files: [%s]\n' "'$rules'"
		printf 'scrape_configs:\n  - job_name: leaderrun\n    static_configs:\n      - targets: [%s]\n' "$targets"
	} >"$dir/prometheus.yml"
	prometheus --config.file="$dir/prometheus.yml" --storage.tsdb.path="$dir/data" \
		--web.listen-address="127.0.0.1:$port" >"$dir/prometheus.log" 2>&1 </dev/null &
	pid=$!
	echo "$pid" >"$dir/pids"
	for i in $(seq 1 400); do
		if ! port_free "$port" && grep -q "Server is ready to receive web requests" "$dir/prometheus.log"; then
			printf 'LEADERRUN_TEST_PROMETHEUS=127.0.0.1:%s\nLEADERRUN_TEST_PROMETHEUS_PID=%s\n' "$port" "$pid" >"$dir/env"
			echo "prometheus.sh: prometheus (pid $pid) on 127.0.0.1:$port" >&2
			return 0
		fi
		alive "$pid" || break
		sleep 0.05
	done
	tail -n 20 "$dir/prometheus.log" >&2 || true
	kill "$pid" 2>/dev/null || true
	die "prometheus did not start"
}

stop() {
	local dir=$1 pid
	[ -f "$dir/pids" ] || die "no $dir/pids: nothing to stop"
	pid=$(head -n 1 "$dir/pids")
	[[ "$pid" =~ ^[0-9]+$ ]] || die "no PID in $dir/pids"
	# Only signal the PID if it is still our server (a PID can be reused).
	tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q "$dir/prometheus.yml" || return 0
	stop_pid "$pid" TERM 100
}

case "${1:-}" in
start) [ $# -ge 4 ] || die "usage: $0 start DIR RULES TARGET..."; d=$2; r=$3; shift 3; start "$d" "$r" "$@" ;;
stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
*) die "usage: $0 start DIR RULES TARGET...|stop DIR" ;;
esac
