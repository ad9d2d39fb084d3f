#!/usr/bin/env bash
# scripts/test.sh runs leaderrun's whole test suite, as CI does (.ci/run calls
# exactly this). On a fresh Debian machine with Go it installs what the tests
# need (redis-server, etcd-server, postgresql and mariadb-server from Debian, Azurite from npm
# into .tools/, the S3 gateway versitygw and the GCS emulator
# fake-gcs-server built from their Go modules by scripts/versitygw.sh and
# scripts/fakegcs.sh into a cache outside the repository), starts real servers on 127.0.0.1 only, runs gofmt, go vet
# and `go test -race` over every package, and stops every server it started
# by PID.
#
#   scripts/test.sh                 # everything
#   scripts/test.sh -run Redis ./lease/redislease   # extra args go to `go test`
#
# The whole suite (no args) ends with chaos runs (scripts/chaos.sh): per
# store one with one lease and one with --slots 3, side by side, two stores
# at a time (three with the file store's, which need no server); 30 s each on
# file, Redis, MariaDB, PostgreSQL, an etcd cluster of three, versitygw (S3)
# and a kube-apiserver, 45 s on Azurite, whose TTL is 15 s; about 3 minutes
# in all, with start-up and shutdown. LEADERRUN_CHAOS_DURATION=5m sets one
# length for every store, =0 skips them.
#
# Kubernetes: the tests of the Kubernetes store need a kube-apiserver and
# its etcd (and kubectl, which they use), which scripts/kubernetes.sh builds from Go modules into a cache
# outside the repository (about an hour and 5 GB of build cache the first
# time on a loaded 2-core machine; nothing afterwards). With the binaries
# cached, the API server starts with the other servers and its tests run
# with the rest. Without them, the whole suite starts that build first, in
# the background, runs everything else, and runs the Kubernetes tests
# (./lease/kubelease and e2e's TestKubernetes*) last, so that a fresh CI
# machine stays within its time limit. With arguments, the API server is
# started only when the binaries are cached.
#
# Progress: each phase is announced with the time since the start, and a
# long step (go vet, a build, starting servers, waiting for a chaos run or
# the kube-apiserver build) says every 30 s that it still runs, with the
# load average; go test's JSON is summarised by scripts/testsummary (one
# line per package as it ends, the output of failures, every 30 s the
# packages still running or being built). A package that hits go test's
# -timeout (15m; LEADERRUN_TEST_TIMEOUT sets another) is said to have timed
# out, with the tests that were running. LEADERRUN_TEST_JSON=FILE keeps a
# copy of go test's JSON (per-test times). The last line is always "N passed,
# N failed": top-level tests, plus one per chaos run, plus one for a phase
# that failed before its tests could count.
#
# Clean-up, also after a time-out or Ctrl-C: every server this script
# started is stopped by PID, and so is every server a test started and
# could not stop (a timed-out test binary runs no clean-up): the tests'
# temporary directories are under this script's own (TMPDIR), where the
# server scripts record their PIDs. Then that directory is removed.
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
# beat WHAT CMD...: run CMD here (it may set variables), saying every 30 s
# (LEADERRUN_TEST_HEARTBEAT) that WHAT still runs, with the load average, so
# that a slow step on a busy machine is never silence.
beat_pid=
beat() {
	local what=$1 t0=$SECONDS rc=0 every=${LEADERRUN_TEST_HEARTBEAT:-30}
	shift
	(
		sp=
		trap 'kill "$sp" 2>/dev/null; exit 0' TERM # and its sleep with it
		while :; do
			sleep "$every" &
			sp=$!
			wait "$sp"
			printf '   ... [%dm%02ds] still running: %s (%ds so far; load %s)\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$what" $((SECONDS - t0)) "$(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null)"
		done
	) &
	beat_pid=$!
	"$@" || rc=$?
	stop_beat
	return $rc
}
stop_beat() {
	if [ -n "$beat_pid" ]; then
		kill "$beat_pid" 2>/dev/null || true
		wait "$beat_pid" 2>/dev/null || true
		beat_pid=
	fi
}
# stop_servers_under DIR WHY: stop every server that a server script started in
# DIR or a directory below it, test.sh's own and those the tests started in
# their temporary directories, by the PIDs the script recorded there (each
# script signals a PID only while it is still its server). A new store's
# server script goes in the case below, by its server's program name. With
# WHY, each one stopped is said.
stop_servers_under() {
	local d pid prog script why=$2
	while IFS= read -r d; do
		script=
		if grep -q '^LEADERRUN_TEST_AZURITE_PID=' "$d/env" 2>/dev/null; then
			script=azurite
		elif [ -s "$d/pids" ]; then
			while read -r pid; do
				prog=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
				case $prog in
				*kube-apiserver*) script=kubernetes; break ;;
				*redis-server*) script=redis ;;
				*postgres*) script=postgres ;;
				*mariadbd* | *mysqld*) script=mariadb ;;
				*prometheus*) script=prometheus ;;
				*versitygw*) script=versitygw ;;
				*fake-gcs-server*) script=fakegcs ;;
				*etcd*) [ -z "$script" ] && script=etcd ;;
				esac
			done <"$d/pids"
		fi
		[ -n "$script" ] || continue
		scripts/$script.sh stop "$d" >/dev/null 2>&1 || true
		[ -z "$why" ] || echo "== stopped the $script server(s) of ${d#"$work"/} ($why)"
	done < <(find "$1" \( -name pids -o -name env \) -type f -printf '%h\n' 2>/dev/null | sort -u)
	return 0
}
# kill_programs_under DIR WHY: SIGKILL every process whose program lies
# under DIR: the leaderrun processes (built there by e2e) that a timed-out
# test binary never cleaned up, stopped ones (SIGSTOP) too. Their guards
# then kill the children.
kill_programs_under() {
	local p exe
	for p in /proc/[0-9]*; do
		exe=$(readlink "$p/exe" 2>/dev/null) || continue
		case $exe in
		"$1"/*)
			kill -KILL "${p#/proc/}" 2>/dev/null || continue
			echo "== killed ${p#/proc/} (${exe#"$work"/}) ($2)"
			;;
		esac
	done
	return 0
}

cleanup() {
	local rc=$?
	stop_beat
	# The tests' first: a timed-out test binary left them running.
	[ -d "$work/tmp" ] && stop_servers_under "$work/tmp" "left running by a test"
	[ -d "$work/tmp" ] && kill_programs_under "$work/tmp" "left running by a test"
	stop_servers_under "$work" ""
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

echo "scripts/test.sh: working in $work (removed at the end)"
echo "scripts/test.sh: the whole suite takes 15 to 20 minutes on a quiet 2-core machine (more under load), 3 of them the chaos runs (LEADERRUN_CHAOS_DURATION=0 skips them)"
. scripts/lib.sh
# What the tests run besides the servers (whose scripts install them):
# e2e's package test renders the man page and verifies the units, gendocs'
# tests parse the completions in their shells and complete after -- with
# bash-completion, Azurite needs npm, e2e's metrics tests check with
# promtool, and e2e's --listen recipe runs haproxy (scripts/haproxy.sh
# starts its own on 127.0.0.1; the package's service, if systemd starts
# it, binds nothing with Debian's configuration). Each test that needs one
# fails without it, naming its package.
checks=(man systemd-analyze zsh fish /usr/share/bash-completion/bash_completion npm haproxy)
packages=(man-db systemd zsh fish bash-completion npm haproxy)
# Only the packages whose check fails: a machine may have one from
# elsewhere (NodeSource's nodejs carries npm, and conflicts with Debian's).
missing=()
for i in "${!checks[@]}"; do
	have "${checks[$i]}" || missing+=("${packages[$i]}")
done
if [ ${#missing[@]} -gt 0 ]; then
	if [ "$(id -u)" = 0 ]; then
		apt_ensure "${checks[@]}" -- "${missing[@]}"
	else
		echo "scripts/test.sh: only root installs what the tests need: apt-get install --no-install-recommends ${missing[*]}" >&2
	fi
fi
# promtool without installing prometheus, which would start a Prometheus
# server on :9090 (Debian has no package of promtool alone): into .tools/bin,
export PATH="$PWD/.tools/bin:$PATH"
(apt_extract promtool prometheus) || echo "scripts/test.sh: no promtool: the tests that check metrics with it will fail" >&2
# and the server itself, which e2e's --listen monitoring test starts on
# 127.0.0.1 (scripts/prometheus.sh).
(apt_extract prometheus prometheus) || echo "scripts/test.sh: no prometheus: TestListenPrometheus will fail" >&2
kube_cache=${XDG_CACHE_HOME:-$HOME/.cache}/leaderrun/kubernetes
kube_cached() { [ -x "$kube_cache/kube-apiserver-1.37.2" ] && [ -x "$kube_cache/etcd-3.6.16" ] && [ -x "$kube_cache/kubectl-1.37.2" ]; }
# kubectl, which the Kubernetes tests and chaos run use, is built with the
# API server (Debian has none): the one of the server's version first.
export PATH="$kube_cache/bin:$PATH"
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
beat "go vet ./... (it prints nothing until it ends)" go vet ./...

# start_servers: start every store's server on 127.0.0.1 and export the
# LEADERRUN_TEST_* variables of its env file. A new store's server: a
# directory under $work, its script's start, then serve_env (cleanup stops
# it through stop_servers_under). beat runs it where set -e does not apply:
# each step returns on failure.
serve_env() { set -a && . "$1/env" && set +a; }
# LEADERRUN_TEST_SERVERS="redis ..." starts only those (redis etcd azurite
# postgres mariadb s3 gcs kubernetes; default all): for a run of a few tests, such
# as testsummary's test of this script itself.
servers=${LEADERRUN_TEST_SERVERS:-all}
want() { [ "$servers" = all ] || [[ " $servers " == *" $1 "* ]]; }
start_servers() {
	local topo
	if want redis; then
		for topo in single cluster sentinel; do
			mkdir -p "$work/redis-$topo" && scripts/redis.sh start "$work/redis-$topo" "$topo" && serve_env "$work/redis-$topo" || return
		done
	fi
	if want etcd; then
		for topo in single cluster; do
			mkdir -p "$work/etcd-$topo" && scripts/etcd.sh start "$work/etcd-$topo" "$topo" && serve_env "$work/etcd-$topo" || return
		done
	fi
	if want azurite; then
		mkdir -p "$work/azurite" && scripts/azurite.sh start "$work/azurite" && serve_env "$work/azurite" || return
	fi
	if want postgres; then
		mkdir -p "$work/postgres" && scripts/postgres.sh start "$work/postgres" && serve_env "$work/postgres" || return
	fi
	if want mariadb; then
		mkdir -p "$work/mariadb" && scripts/mariadb.sh start "$work/mariadb" && serve_env "$work/mariadb" || return
	fi
	if want s3; then
		# versitygw is built from its Go module the first time (a few minutes).
		mkdir -p "$work/versitygw" && scripts/versitygw.sh start "$work/versitygw" && serve_env "$work/versitygw" || return
	fi
	if want gcs; then
		# fake-gcs-server too (a few minutes the first time).
		mkdir -p "$work/fakegcs" && scripts/fakegcs.sh start "$work/fakegcs" && serve_env "$work/fakegcs" || return
	fi
}
phase "starting servers on 127.0.0.1 (installing them when missing)"
beat "starting the servers" start_servers
# (passwords masked: the tests check that nothing prints them)
env | grep '^LEADERRUN_TEST_' | grep -v 'PID\|ADDRS\|SECRET' | sed -e 's/^/   /' -e 's#://\([^:/@]*\):[^@]*@#://\1:xxxxx@#'

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
elif kube_cached && want kubernetes; then
	start_kubernetes # its tests run with the rest
fi
[ ${#args[@]} -eq 0 ] && args=(./...) shown=./...
phase "go test -race $shown"
beat "go build ./scripts/testsummary" go build -o "$work/testsummary" ./scripts/testsummary
timeout=${LEADERRUN_TEST_TIMEOUT:-15m}
# The tests' temporary directories (t.TempDir, and the servers they start
# there) go under $work, so that cleanup finds what a timed-out test left.
# Like /tmp: some tests run programs as another user, which make their
# own temporary files or read the tests' (TestMain makes its directory
# readable to all).
chmod 0711 "$work"
mkdir -p -m 1777 "$work/tmp"
export TMPDIR=$work/tmp
# The whole suite runs the e2e package after the others, alone: beside
# the store packages' conformance suites, on 2 cores, the servers answered
# both too slowly ("no answer in time" from etcd and Azurite, e2e past its
# time-out with tests not started).
e2e=()
if [ $# -eq 0 ]; then
	mapfile -t args < <(go list "${args[@]}" | grep -v '/e2e$')
	e2e=(./e2e)
fi
set +e
# -parallel 4: most of e2e's parallel tests wait on a TTL or a server, not a
# core; with GOMAXPROCS (2) slots e2e alone took about 290 s, with 4 about 220.
{
	go test -race -count=1 -parallel 4 -timeout "$timeout" -json "${skip[@]}" "${args[@]}"
	[ ${#e2e[@]} -eq 0 ] || go test -race -count=1 -parallel 4 -timeout "$timeout" -json "${skip[@]}" "${e2e[@]}"
} 2>&1 | tee ${LEADERRUN_TEST_JSON:+"$LEADERRUN_TEST_JSON"} | "$work/testsummary" -counts "$work/counts"
test_rc=$?
set -e
read -r n_passed n_failed < "$work/counts" || { n_passed=0 n_failed=1; }
[ "$test_rc" -eq 0 ] || exit 1

if [ -n "$kube_last" ]; then
	if [ -n "$kube_build" ]; then
		phase "waiting for the kube-apiserver build (log: $work/kube-build.log)"
		beat "the kube-apiserver build" wait "$kube_build" || { tail -n 20 "$work/kube-build.log" >&2; kube_build=; exit 1; }
		kube_build=
	fi
	phase "Kubernetes: go test -race ./lease/kubelease, e2e's TestKubernetes* and the Kubernetes cases of its every-store tests"
	start_kubernetes
	set +e
	{
		go test -race -count=1 -timeout "$timeout" -json ./lease/kubelease
		go test -race -count=1 -parallel 4 -timeout "$timeout" -json -run '^TestKubernetes' ./e2e
		# The Kubernetes cases of the tests that run on every store (their
		# store lists gain one when LEADERRUN_TEST_KUBECONFIG is set).
		go test -race -count=1 -parallel 4 -timeout "$timeout" -json \
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
	phase "chaos: ${chaos:-30s per store, 60s on Azurite}, 12 contenders, one lease and --slots 3, two or three stores at a time"
	chaos_runs=0
	mkdir -p "$work/chaosbin"
	build_chaos() {
		go build -o "$work/chaosbin/" . ./cmd/... && # leaderrun and its store programs
			go build -o "$work/chaosbin/chaosrun" ./scripts/chaosrun &&
			go build -o "$work/chaosbin/chaoscheck" ./scripts/chaoscheck
	}
	beat "go build of leaderrun, its store programs, chaosrun and chaoscheck" build_chaos
	failed=()
	# chaos_pair STORE: one lease and --slots 3 side by side, each on
	# servers of its own, logged to $work/chaos-STORE{,-slots}.log.
	# 12 contenders, not chaos.sh's 20: up to six runs share two cores
	# here, and at 20 each (load near 40) a 15 s-TTL Azurite run once saw
	# no child start within its window.
	chaos_pair() {
		local d=$chaos
		if [ -z "$d" ]; then
			case $1 in
			azurite) d=60s ;; # TTL 15s: fewer fault cycles per second
			*) d=30s ;;
			esac
		fi
		# Each in a session of its own (setsid execs in place: $! is
		# chaos.sh), so that a run that outlives its bound can be shown
		# and stopped whole (chaos_wait).
		CHAOS_CONTENDERS=${CHAOS_CONTENDERS:-12} CHAOS_BIN=$work/chaosbin setsid scripts/chaos.sh --store "$1" "$d" >"$work/chaos-$1.log" 2>&1 &
		pids+=($!) runs+=("$1") logs+=("$work/chaos-$1.log") limits+=("$(chaos_limit "$d")")
		CHAOS_CONTENDERS=${CHAOS_CONTENDERS:-12} CHAOS_BIN=$work/chaosbin setsid scripts/chaos.sh --store "$1" --slots 3 "$d" >"$work/chaos-$1-slots.log" 2>&1 &
		pids+=($!) runs+=("$1 --slots 3") logs+=("$work/chaos-$1-slots.log") limits+=("$(chaos_limit "$d")")
	}
	# chaos_limit DURATION: the seconds a chaos run may take in all: its
	# faults, then 6 minutes for starting and stopping servers, the
	# wrappers' shutdown and the check.
	chaos_limit() {
		local d=$1 n
		n=${d%[smh]}
		case $d in
		*m) n=$((n * 60)) ;;
		*h) n=$((n * 3600)) ;;
		esac
		echo $((n + 360))
	}
	# chaos_wait PID LIMIT: wait for chaos.sh PID until LIMIT seconds after
	# the run began. Past it, the processes of its session are listed (with
	# the kernel's wait channel of each), chaos.sh is sent SIGTERM (its
	# clean-up stops its driver and servers) and, 60 s later, whatever is
	# left of its session SIGKILL: a hung run fails with its state shown,
	# never runs into CI's limit in silence.
	chaos_wait() {
		local pid=$1 limit=$2 i
		running() { # not yet a zombie (an ended child stays one until waited for)
			local st
			st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1)
			[ -n "$st" ] && [ "$st" != Z ]
		}
		while running "$pid" && [ $((SECONDS - chaos_t0)) -lt "$limit" ]; do
			sleep 1
		done
		if running "$pid"; then
			echo "chaos run still going ${limit}s after it began; its processes:"
			ps -s "$pid" -o pid,ppid,stat,etimes,wchan:24,args 2>/dev/null || true
			kill -TERM "$pid" 2>/dev/null || true
			for i in $(seq 1 60); do
				running "$pid" || break
				sleep 1
			done
			pkill -KILL -s "$pid" || true
			wait "$pid" 2>/dev/null || true
			return 1
		fi
		wait "$pid"
	}
	# Two stores at a time (four runs): the runs wait on TTLs and faults
	# more than on the cores.
	# (the file store's runs need no server: three stores in the first.)
	for stores in "file redis mysql" "postgres etcd" "s3 gcs" "azurite kubernetes"; do
		pids=() runs=() logs=() limits=() chaos_t0=$SECONDS
		for store in $stores; do
			chaos_pair "$store"
		done
		for i in "${!pids[@]}"; do
			chaos_runs=$((chaos_runs + 1))
			beat "chaos run: ${runs[$i]}" chaos_wait "${pids[$i]}" "${limits[$i]}" || failed+=("${runs[$i]}")
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
