#!/usr/bin/env bash
# etcd.sh starts and stops throw-away etcd servers for leaderrun's tests.
# Everything binds 127.0.0.1 only, lives in one directory, and is stopped by
# the PIDs recorded there (never by process name).
#
#   scripts/etcd.sh start DIR [single|cluster|tls] [ETCD-FLAG...]
#       Start the topology (every member gets the extra etcd flags, e.g.
#       --election-timeout=3000 or --auth-token-ttl=1), wait until every member reports healthy, write
#       DIR/env:
#         single:  LEADERRUN_TEST_ETCD_URL=etcd://127.0.0.1:PORT
#                  LEADERRUN_TEST_ETCD_PID=PID
#         cluster: LEADERRUN_TEST_ETCD_CLUSTER_URL=etcd://127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#                  LEADERRUN_TEST_ETCD_CLUSTER_ADDRS=127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#                  LEADERRUN_TEST_ETCD_CLUSTER_PIDS=PID1,PID2,PID3
#                  (3 members; the n-th PID is the member at the n-th address)
#         tls:     LEADERRUN_TEST_ETCD_TLS_URL=etcds://127.0.0.1:PORT
#                  LEADERRUN_TEST_ETCD_TLS_PID=PID
#                  (clients must present a certificate signed by the CA; the
#                  caller puts ca.crt, server.crt, server.key in DIR/tls first)
#       DIR/pids lists every PID started, one a line; DIR/NAME/etcd.log each
#       member's log.
#   scripts/etcd.sh stop DIR
#       SIGCONT, SIGTERM (then SIGKILL) the PIDs in DIR/pids that are still
#       etcd.
#
# etcd and etcdctl come from the Debian packages etcd-server and etcd-client;
# they are installed with apt-get when missing.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

ensure_etcd() { apt_ensure etcd etcdctl -- etcd-server etcd-client; }

# etcd_port: sets port to one that looks free and differs from those
# already handed out. 10000-19999: below the kernel's ephemeral range
# (32768-60999), where the tests' own outgoing connections would make a
# port that looks free fail to bind, and below redis.sh's 20000-39999.
port=
etcd_port() { free_port 10000 10000; }

# kill_pid DIR PID: stop PID if it is still an etcd process with its data in
# DIR (a test may have killed it already, and its PID been reused by another
# test's etcd).
kill_pid() {
	local dir=$1 pid=$2
	[ -r "/proc/$pid/cmdline" ] || return 0
	tr '\0' '\n' <"/proc/$pid/cmdline" | head -n1 | grep -q 'etcd$' || return 0
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -qF -- "--data-dir $dir/" || return 0
	# Throw-away servers: do not wait out a slow shutdown.
	stop_pid "$pid" TERM 20
}

# healthy ADDR: the member at ADDR answers a linearizable read.
tls_args=()
healthy() {
	ETCDCTL_API=3 etcdctl --endpoints="$1" --dial-timeout=1s --command-timeout=2s "${tls_args[@]}" \
		endpoint health >/dev/null 2>&1
}

# wait_healthy PID ADDR: until the member answers (about 20 s at most), or
# its process is gone.
wait_healthy() { wait_until "$1" 200 0.1 healthy "$2"; }

# member DIR NAME CPORT PPORT CLUSTER TOKEN: start one member in the
# background; prints its PID. Clients speak $client_scheme.
client_scheme=http
member() {
	local dir=$1 name=$2 cport=$3 pport=$4 cluster=$5 token=$6
	mkdir -p "$dir/$name"
	etcd --name "$name" --data-dir "$dir/$name/data" \
		--listen-client-urls "$client_scheme://127.0.0.1:$cport" --advertise-client-urls "$client_scheme://127.0.0.1:$cport" \
		--listen-peer-urls "http://127.0.0.1:$pport" --initial-advertise-peer-urls "http://127.0.0.1:$pport" \
		--initial-cluster "$cluster" --initial-cluster-token "$token" --initial-cluster-state new \
		--logger zap --log-outputs stderr "${extra[@]}" \
		</dev/null >"$dir/$name/etcd.log" 2>&1 &
	echo $!
}

start_single() {
	local dir=$1 key=${2:-LEADERRUN_TEST_ETCD} scheme=${3:-etcd} try cport pport pid
	for try in 1 2 3 4 5; do
		etcd_port
		cport=$port
		etcd_port
		pport=$port
		pid=$(member "$dir" "single-$cport" "$cport" "$pport" "single-$cport=http://127.0.0.1:$pport" "leaderrun-$cport")
		echo "$pid" >>"$dir/pids"
		if wait_healthy "$pid" "127.0.0.1:$cport"; then
			{
				echo "${key}_URL=$scheme://127.0.0.1:$cport"
				echo "${key}_PID=$pid"
			} >>"$dir/env"
			return
		fi
		kill_pid "$dir" "$pid"
	done
	tail -n 2 "$dir"/single-*/etcd.log >&2 || true
	die "could not start etcd (see $dir/single-*/etcd.log)"
}

start_cluster() {
	local dir=$1 try i cports=() pports=() pids=() addrs=() cluster ok
	for try in 1 2 3; do
		cports=() pports=() pids=() addrs=() cluster=""
		for i in 1 2 3; do
			etcd_port
			cports+=("$port")
			etcd_port
			pports+=("$port")
			cluster+="${cluster:+,}m$i-${cports[0]}=http://127.0.0.1:${pports[$((i - 1))]}"
		done
		for i in 1 2 3; do
			pids+=("$(member "$dir" "m$i-${cports[0]}" "${cports[$((i - 1))]}" "${pports[$((i - 1))]}" "$cluster" "leaderrun-${cports[0]}")")
			echo "${pids[$((i - 1))]}" >>"$dir/pids"
			addrs+=("127.0.0.1:${cports[$((i - 1))]}")
		done
		ok=1
		for i in 0 1 2; do
			wait_healthy "${pids[$i]}" "${addrs[$i]}" || { ok=0; break; }
		done
		if [ "$ok" = 1 ]; then
			local IFS=,
			{
				echo "LEADERRUN_TEST_ETCD_CLUSTER_URL=etcd://${addrs[*]}"
				echo "LEADERRUN_TEST_ETCD_CLUSTER_ADDRS=${addrs[*]}"
				echo "LEADERRUN_TEST_ETCD_CLUSTER_PIDS=${pids[*]}"
			} >>"$dir/env"
			return
		fi
		for i in 0 1 2; do
			kill_pid "$dir" "${pids[$i]}"
		done
	done
	tail -n 2 "$dir"/m*/etcd.log >&2 || true
	die "could not start an etcd cluster (see $dir/m*/etcd.log)"
}

extra=()
cmd_start() {
	[ $# -ge 1 ] || die "usage: etcd.sh start DIR [single|cluster|tls] [ETCD-FLAG...]"
	local dir=$1 topo=${2:-single}
	extra=("${@:3}")
	ensure_etcd
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	case $topo in
	single) start_single "$dir" ;;
	cluster) start_cluster "$dir" ;;
	tls)
		local f
		for f in ca.crt server.crt server.key; do
			[ -s "$dir/tls/$f" ] || die "tls: put ca.crt, server.crt and server.key in $dir/tls first"
		done
		client_scheme=https
		extra+=(--cert-file "$dir/tls/server.crt" --key-file "$dir/tls/server.key"
			--client-cert-auth --trusted-ca-file "$dir/tls/ca.crt")
		tls_args=(--cacert "$dir/tls/ca.crt" --cert "$dir/tls/server.crt" --key "$dir/tls/server.key")
		start_single "$dir" LEADERRUN_TEST_ETCD_TLS etcds
		;;
	*) die "unknown topology $topo (want single, cluster or tls)" ;;
	esac
}

cmd_stop() {
	[ $# -eq 1 ] || die "usage: etcd.sh stop DIR"
	local dir
	[ -f "$1/pids" ] || return 0
	dir=$(cd "$1" && pwd) # as start wrote it into each --data-dir
	stop_listed "$dir" kill_pid "$dir"
}

case ${1:-} in
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
*) die "usage: etcd.sh start DIR [single|cluster|tls] [ETCD-FLAG...] | stop DIR" ;;
esac
