#!/usr/bin/env bash
# scripts/test.sh runs leaderrun's whole test suite, as CI does (.ci/run calls
# exactly this). On a fresh Debian machine with Go it installs what the tests
# need (redis-server, etcd-server and postgresql from Debian, Azurite from npm
# into .tools/), starts real servers on 127.0.0.1 only, runs gofmt, go vet
# and `go test -race` over every package, and stops every server it started
# by PID.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh -run Redis ./lease/redislease   # extra args go to `go test`
#
# The whole suite (no args) ends with a chaos run per store (scripts/chaos.sh:
# 45 s each on file, Redis and PostgreSQL, 30 s on an etcd cluster of three,
# 60 s on Azurite, whose TTL is 15 s; about 4.5 minutes in all, with start-up
# and shutdown); LEADERRUN_CHAOS_DURATION=5m sets one length for
# every store, =0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"

work=$(mktemp -d /tmp/leaderrun-test.XXXXXX)
cleanup() {
	local rc=$?
	[ -f "$work/azurite/env" ] && scripts/azurite.sh stop "$work/azurite" || true
	[ -f "$work/postgres/pids" ] && scripts/postgres.sh stop "$work/postgres" || true
	for d in "$work"/redis-*; do
		[ -f "$d/pids" ] && scripts/redis.sh stop "$d" || true
	done
	for d in "$work"/etcd-*; do
		[ -f "$d/pids" ] && scripts/etcd.sh stop "$d" || true
	done
	rm -rf "$work"
	exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "== gofmt, go vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.tools/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi
go vet ./...

echo "== starting servers on 127.0.0.1"
for topo in single cluster sentinel; do
	mkdir -p "$work/redis-$topo"
	scripts/redis.sh start "$work/redis-$topo" "$topo"
	set -a; . "$work/redis-$topo/env"; set +a
done
for topo in single cluster; do
	mkdir -p "$work/etcd-$topo"
	scripts/etcd.sh start "$work/etcd-$topo" "$topo"
	set -a; . "$work/etcd-$topo/env"; set +a
done
mkdir -p "$work/azurite"
scripts/azurite.sh start "$work/azurite"
set -a; . "$work/azurite/env"; set +a
mkdir -p "$work/postgres"
scripts/postgres.sh start "$work/postgres"
set -a; . "$work/postgres/env"; set +a
# (passwords masked: the tests check that nothing prints them)
env | grep '^LEADERRUN_TEST_' | grep -v 'PID\|ADDRS' | sed -e 's/^/   /' -e 's#://\([^:/@]*\):[^@]*@#://\1:xxxxx@#'

echo "== go test -race"
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(./...)
go test -race -count=1 -timeout 9m "${args[@]}"

chaos=${LEADERRUN_CHAOS_DURATION:-}
if [ ${#args[@]} -eq 1 ] && [ "${args[0]}" = ./... ] && [ "$chaos" != 0 ]; then
	echo "== chaos: ${chaos:-45s per store, 30s on etcd, 60s on Azurite}"
	mkdir -p "$work/chaosbin"
	go build -o "$work/chaosbin/" . ./cmd/... # leaderrun and its store programs
	go build -o "$work/chaosbin/chaosrun" ./scripts/chaosrun
	go build -o "$work/chaosbin/chaoscheck" ./scripts/chaoscheck
	failed=()
	for store in file redis postgres etcd azurite; do
		d=$chaos
		if [ -z "$d" ]; then
			case $store in
			azurite) d=60s ;;
			etcd) d=30s ;; # a cluster of three on top of the contenders: kept short
			*) d=45s ;;
			esac
		fi
		CHAOS_BIN=$work/chaosbin scripts/chaos.sh --store "$store" "$d" || failed+=("$store")
	done
	if [ ${#failed[@]} -gt 0 ]; then
		echo "chaos run failed on: ${failed[*]}" >&2
		exit 1
	fi
fi
