#!/usr/bin/env bash
# Start and stop a private Azurite blob service on 127.0.0.1 for tests.
#
#   scripts/azurite.sh start DIR   install Azurite (pinned) into .tools/ if missing, start
#                                  azurite-blob on a free 127.0.0.1 port, wait until it
#                                  answers, and write DIR/env:
#                                    LEADERRUN_TEST_AZURITE=http://127.0.0.1:PORT/devstoreaccount1
#                                    LEADERRUN_TEST_AZURITE_PID=PID
#   scripts/azurite.sh stop DIR    stop the instance recorded in DIR/env, by its PID only
#
# The instance keeps everything in memory, so nothing survives a stop; with
# AZURITE_LOCATION=DIR set, it keeps its data in DIR instead (scripts/chaos.sh restarts
# it with its data). It serves the well-known development account devstoreaccount1
# with its published key.
set -euo pipefail

AZURITE_VERSION=3.37.0
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
prefix="$root/.tools/azurite-$AZURITE_VERSION"
bin="$prefix/node_modules/.bin/azurite-blob"

die() { echo "azurite.sh: $*" >&2; exit 1; }

install() {
	[ -x "$bin" ] && return 0
	command -v npm >/dev/null || die "npm not found: install Node.js to run Azurite"
	mkdir -p "$prefix"
	# Tests may start several instances at once: one installer at a time.
	if command -v flock >/dev/null; then
		exec 9>"$prefix.lock"
		flock 9
		[ -x "$bin" ] && return 0
	fi
	echo "azurite.sh: installing azurite@$AZURITE_VERSION into $prefix" >&2
	npm install --silent --no-audit --no-fund --prefix "$prefix" "azurite@$AZURITE_VERSION" >&2 ||
		die "npm install azurite@$AZURITE_VERSION failed"
	[ -x "$bin" ] || die "azurite-blob missing after install"
}

free_port() {
	node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'
}

# Any HTTP answer (even 403) means Azurite is serving.
answers() {
	if command -v curl >/dev/null; then
		curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$1/devstoreaccount1?comp=list"
	else
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
	fi
}

start() {
	local dir=$1 port pid i
	mkdir -p "$dir"
	install
	local persist=(--inMemoryPersistence)
	[ -n "${AZURITE_LOCATION:-}" ] && persist=(--location "$AZURITE_LOCATION")
	for attempt in 1 2 3; do
		port=$(free_port)
		AZURITE_SKIP_API_VERSION_CHECK=true "$bin" --blobHost 127.0.0.1 --blobPort "$port" \
			"${persist[@]}" --skipApiVersionCheck --loose --silent \
			>"$dir/azurite.log" 2>&1 </dev/null &
		pid=$!
		# Node loads Azurite in about a second on a quiet machine; beside
		# stress-ng (load 15 on 2 cores) it once took over 10 s, three
		# times over. A live process is waited for up to a minute; one that
		# exited (port taken?) is tried again on another port at once.
		local until=$((SECONDS + 60))
		while [ "$SECONDS" -lt "$until" ]; do
			if answers "$port"; then
				printf 'LEADERRUN_TEST_AZURITE=http://127.0.0.1:%s/devstoreaccount1\nLEADERRUN_TEST_AZURITE_PID=%s\n' "$port" "$pid" >"$dir/env"
				echo "azurite.sh: Azurite $AZURITE_VERSION (pid $pid) on http://127.0.0.1:$port/devstoreaccount1" >&2
				return 0
			fi
			kill -0 "$pid" 2>/dev/null || break # exited (port taken?): try another port
			sleep 0.1
		done
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	cat "$dir/azurite.log" >&2 || true
	die "Azurite did not start"
}

stop() {
	local dir=$1 pid
	[ -f "$dir/env" ] || die "no $dir/env: nothing to stop"
	pid=$(sed -n 's/^LEADERRUN_TEST_AZURITE_PID=//p' "$dir/env")
	[[ "$pid" =~ ^[0-9]+$ ]] || die "no PID in $dir/env"
	# Only signal the PID if it is still our Azurite (a PID can be reused).
	if ! tr '\0' ' ' 2>/dev/null <"/proc/$pid/cmdline" | grep -q azurite; then
		return 0
	fi
	kill "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 50); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
}

case "${1:-}" in
start) [ $# -eq 2 ] || die "usage: $0 start DIR"; start "$2" ;;
stop) [ $# -eq 2 ] || die "usage: $0 stop DIR"; stop "$2" ;;
*) die "usage: $0 start|stop DIR" ;;
esac
