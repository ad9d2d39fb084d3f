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
# The whole suite (no args) ends with chaos runs (scripts/chaos.sh): per
# store one with one lease and one with --slots 3, side by side, two stores
# at a time; 30 s each on file, Redis, PostgreSQL, an etcd cluster of three
# and a kube-apiserver, 45 s on Azurite, whose TTL is 15 s; about 3 minutes
# in all, with start-up and shutdown. LEADERRUN_CHAOS_DURATION=5m sets one
# length for every store, =0 skips them.
#
# Kubernetes: the tests of the Kubernetes store need a kube-apiserver and
# its etcd, which scripts/kubernetes.sh builds from Go modules into a cache
# outside the repository (about an hour and 5 GB of build cache the first
# time on a loaded 2-core machine; nothing afterwards). With the binaries
# cached, the API server starts with the other servers and its tests run
# with the rest. Without them, the whole suite starts that build first, in
# the background, runs everything else, and runs the Kubernetes tests
# (./lease/kubelease and e2e's TestKubernetes*) last, so that a fresh CI
# machine stays within its time limit. With arguments, the API server is
# started only when the binaries are cached.
#
# Progress: each phase is announced with the time since the start; go test's
# JSON is summarised by scripts/testsummary (one line per package as it ends,
# the output of failures, every 30 s the packages still running). The last
# line is always "N passed, N failed": top-level tests, plus one per chaos
# run, plus one for a phase that failed before its tests could count.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null || echo "$HOME/go")/bin"

work=$(mktemp -d /tmp/leaderrun-test.XXXXXX)
started=$SECONDS
phase_name=setup
n_passed=0 n_failed=0
# phase NAME: announce a phase, with the time since the start.
phase() {
	phase_name=$1
	printf '== [%dm%02ds] %s\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$1"
}
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
	[ -f "$work/kubernetes/pids" ] && scripts/kubernetes.sh stop "$work/kubernetes" || true
	if [ -n "$kube_build" ]; then
		kill -- -"$kube_build" 2>/dev/null || true # its own process group (setsid)
		wait "$kube_build" 2>/dev/null || true
	fi
	rm -rf "$work"
	if [ "$rc" -ne 0 ] && [ "$n_failed" -eq 0 ]; then
		echo "== failed in phase: $phase_name"
		n_failed=1
	fi
	printf '== done in %dm%02ds\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60))
	echo "$n_passed passed, $n_failed failed"
	exit $rc
}
kube_build=
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "scripts/test.sh: the whole suite takes about 8 minutes on a quiet 2-core machine (more under load), 3 of them the chaos runs (LEADERRUN_CHAOS_DURATION=0 skips them)"
. scripts/lib.sh
if [ "$(id -u)" = 0 ]; then
	# e2e's package test renders the man page and verifies the unit;
	# gendocs' test parses the completions in their shells.
	apt_ensure man systemd-analyze dpkg zsh fish promtool -- man-db systemd zsh fish prometheus
fi
kube_cached() { [ -x "${XDG_CACHE_HOME:-$HOME/.cache}/leaderrun/kubernetes/kube-apiserver-1.37.2" ] && [ -x "${XDG_CACHE_HOME:-$HOME/.cache}/leaderrun/kubernetes/etcd-3.6.16" ]; }
if [ $# -eq 0 ] && ! kube_cached; then
	echo "scripts/test.sh: building kube-apiserver and etcd in the background for the Kubernetes tests, which run last (about an hour the first time; log in $work/kube-build.log)"
	setsid scripts/kubernetes.sh build >"$work/kube-build.log" 2>&1 &
	kube_build=$!
fi
phase "gofmt, go vet"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './.tools/*'))
if [ -n "$unformatted" ]; then
	echo "gofmt would change: $unformatted" >&2
	exit 1
fi
go vet ./...

phase "starting servers on 127.0.0.1 (installing them when missing)"
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

# start_kubernetes: start the API server and export its variables.
start_kubernetes() {
	mkdir -p "$work/kubernetes"
	scripts/kubernetes.sh start "$work/kubernetes"
	set -a; . "$work/kubernetes/env"; set +a
	echo "   LEADERRUN_TEST_KUBECONFIG=$LEADERRUN_TEST_KUBECONFIG"
}
args=("$@")
skip=()
shown="${args[*]}"
kube_last=
if [ ${#args[@]} -eq 0 ] && [ -n "$kube_build" ]; then
	shown="./... but ./lease/kubelease and TestKubernetes*"
	# Everything but the Kubernetes tests, which run last (below), once
	# the API server is built.
	mapfile -t args < <(go list ./... | grep -v '/lease/kubelease$')
	skip=(-skip '^TestKubernetes')
	kube_last=1
elif kube_cached; then
	start_kubernetes # its tests run with the rest
fi
[ ${#args[@]} -eq 0 ] && args=(./...) shown=./...
phase "go test -race $shown"
go build -o "$work/testsummary" ./scripts/testsummary
set +e
# -parallel 4: most of e2e's parallel tests wait on a TTL or a server, not a
# core; with GOMAXPROCS (2) slots e2e alone took about 290 s, with 4 about 220.
go test -race -count=1 -parallel 4 -timeout 9m -json "${skip[@]}" "${args[@]}" 2>&1 | "$work/testsummary" -counts "$work/counts"
test_rc=$?
set -e
read -r n_passed n_failed < "$work/counts" || { n_passed=0 n_failed=1; }
[ "$test_rc" -eq 0 ] || exit 1

if [ -n "$kube_last" ]; then
	if [ -n "$kube_build" ]; then
		phase "waiting for the kube-apiserver build (log: $work/kube-build.log)"
		wait "$kube_build" || { tail -n 20 "$work/kube-build.log" >&2; kube_build=; exit 1; }
		kube_build=
	fi
	phase "Kubernetes: go test -race ./lease/kubelease, e2e's TestKubernetes* and the Kubernetes cases of its every-store tests"
	start_kubernetes
	set +e
	{
		go test -race -count=1 -timeout 9m -json ./lease/kubelease
		go test -race -count=1 -parallel 4 -timeout 9m -json -run '^TestKubernetes' ./e2e
		# The Kubernetes cases of the tests that run on every store (their
		# store lists gain one when LEADERRUN_TEST_KUBECONFIG is set).
		go test -race -count=1 -parallel 4 -timeout 9m -json \
			-run '^(TestHoldAtLeast|TestHoldWaiterWakesAtEnd|TestStandbysInStatus|TestPriorityTakeover|TestPriorityFrozenBetterStandby|TestWatchSequence)$/^kubernetes$' ./e2e
	} 2>&1 | "$work/testsummary" -counts "$work/counts-kube"
	test_rc=$?
	set -e
	read -r kp kf < "$work/counts-kube" || { kp=0 kf=1; }
	n_passed=$((n_passed + kp)) n_failed=$((n_failed + kf))
	[ "$test_rc" -eq 0 ] || exit 1
fi

chaos=${LEADERRUN_CHAOS_DURATION:-}
if [ $# -eq 0 ] && [ "$chaos" != 0 ]; then
	phase "chaos: ${chaos:-30s per store, 45s on Azurite}, one lease and --slots 3, two stores at a time"
	chaos_runs=0
	mkdir -p "$work/chaosbin"
	go build -o "$work/chaosbin/" . ./cmd/... # leaderrun and its store programs
	go build -o "$work/chaosbin/chaosrun" ./scripts/chaosrun
	go build -o "$work/chaosbin/chaoscheck" ./scripts/chaoscheck
	failed=()
	# chaos_pair STORE: one lease and --slots 3 side by side, each on
	# servers of its own, logged to $work/chaos-STORE{,-slots}.log.
	chaos_pair() {
		local d=$chaos
		if [ -z "$d" ]; then
			case $1 in
			azurite) d=45s ;; # TTL 15s: fewer fault cycles per second
			*) d=30s ;;
			esac
		fi
		CHAOS_BIN=$work/chaosbin scripts/chaos.sh --store "$1" "$d" >"$work/chaos-$1.log" 2>&1 &
		pids+=($!) runs+=("$1") logs+=("$work/chaos-$1.log")
		CHAOS_BIN=$work/chaosbin scripts/chaos.sh --store "$1" --slots 3 "$d" >"$work/chaos-$1-slots.log" 2>&1 &
		pids+=($!) runs+=("$1 --slots 3") logs+=("$work/chaos-$1-slots.log")
	}
	# Two stores at a time (four runs): the runs wait on TTLs and faults
	# more than on the cores.
	for stores in "file redis" "postgres etcd" "azurite kubernetes"; do
		pids=() runs=() logs=()
		for store in $stores; do
			chaos_pair "$store"
		done
		for i in "${!pids[@]}"; do
			chaos_runs=$((chaos_runs + 1))
			wait "${pids[$i]}" || failed+=("${runs[$i]}")
			echo "-- ${runs[$i]}"; cat "${logs[$i]}"
		done
	done
	n_passed=$((n_passed + chaos_runs - ${#failed[@]}))
	n_failed=$((n_failed + ${#failed[@]}))
	if [ ${#failed[@]} -gt 0 ]; then
		echo "chaos run failed on: ${failed[*]}" >&2
		exit 1
	fi
fi
