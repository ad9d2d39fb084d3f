#!/usr/bin/env bash
# Start and stop a private haproxy on 127.0.0.1 for tests: the load
# balancer of docs/listen.md's recipe, in front of instances whose
# leaderrun serves --listen.
#
#   scripts/haproxy.sh start DIR APP:CHECK...   start haproxy (Debian's package) on a free
#                                  127.0.0.1 port, balancing over one server per
#                                  APP:CHECK (127.0.0.1 ports: the application's, and
#                                  its leaderrun's --listen, whose GET /leader is the
#                                  health check, every 100 ms), wait until it answers,
#                                  and write DIR/env:
#                                    LEADERRUN_TEST_HAPROXY=127.0.0.1:PORT
#                                    LEADERRUN_TEST_HAPROXY_PID=PID
#   scripts/haproxy.sh stop DIR    stop the instance recorded in DIR/env, by its PID only
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

start() {
	local dir=$1 port pid i n=0 b
	shift
	PATH=$PATH:/usr/sbin # Debian's haproxy is there, off a user's PATH
	have haproxy || die "haproxy not found: apt-get install --no-install-recommends haproxy (scripts/test.sh does)"
	mkdir -p "$dir"
	free_port 20000 20000
	{
		printf 'global\n\tmaxconn 256\n\nlisten leader\n\tmode http\n\tbind 127.0.0.1:%s\n' "$port"
		printf '\ttimeout connect 1s\n\ttimeout client 5s\n\ttimeout server 5s\n\ttimeout check 1s\n'
		# The recipe: only a server whose leaderrun answers 200 on /leader
		# gets traffic.
		printf '\toption httpchk GET /leader\n\thttp-check expect status 200\n'
		printf '\tdefault-server inter 100ms fall 1 rise 1\n'
		for b in "$@"; do
			n=$((n + 1))
			printf '\tserver s%d 127.0.0.1:%s check port %s\n' "$n" "${b%%:*}" "${b##*:}"
		done
	} >"$dir/haproxy.cfg"
	haproxy -c -q -f "$dir/haproxy.cfg" >&2 || die "haproxy refused $dir/haproxy.cfg"
	haproxy -db -f "$dir/haproxy.cfg" >"$dir/haproxy.log" 2>&1 </dev/null &
	pid=$!
	for i in $(seq 1 100); do
		if ! port_free "$port"; then
			printf 'LEADERRUN_TEST_HAPROXY=127.0.0.1:%s\nLEADERRUN_TEST_HAPROXY_PID=%s\n' "$port" "$pid" >"$dir/env"
			echo "haproxy.sh: haproxy (pid $pid) on 127.0.0.1:$port" >&2
			return 0
		fi
		alive "$pid" || break
		sleep 0.05
	done
	cat "$dir/haproxy.log" >&2 || true
	kill "$pid" 2>/dev/null || true
	die "haproxy did not start"
}

stop() {
	local dir=$1 pid
	[ -f "$dir/env" ] || die "no $dir/env: nothing to stop"
	pid=$(sed -n 's/^LEADERRUN_TEST_HAPROXY_PID=//p' "$dir/env")
	[[ "$pid" =~ ^[0-9]+$ ]] || die "no PID in $dir/env"
	# Only signal the PID if it is still our haproxy (a PID can be reused).
	tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q "$dir/haproxy.cfg" || return 0
	stop_pid "$pid" TERM 40
}

case "${1:-}" in
start) [ $# -ge 3 ] || die "usage: $0 start DIR APP:CHECK..."; d=$2; shift 2; start "$d" "$@" ;;
stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
*) die "usage: $0 start DIR APP:CHECK...|stop DIR" ;;
esac
