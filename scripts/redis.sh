#!/usr/bin/env bash
# redis.sh starts and stops throw-away redis-server processes for leaderrun's
# tests. Everything binds 127.0.0.1 only, lives in one directory, and is
# stopped by the PIDs recorded there (never by process name).
#
#   scripts/redis.sh start DIR [single|cluster|sentinel|tls]
#       Start the topology, wait until it answers, write DIR/env:
#         single:   LEADERRUN_TEST_REDIS=127.0.0.1:PORT
#                   LEADERRUN_TEST_REDIS_PID=PID
#         cluster:  LEADERRUN_TEST_REDIS_CLUSTER=127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3
#                   (3 masters, no replicas)
#         sentinel: LEADERRUN_TEST_REDIS_SENTINEL=127.0.0.1:SPORT
#                   LEADERRUN_TEST_REDIS_SENTINEL_MASTER=leaderrun-test
#                   (one master, one sentinel)
#         tls:      LEADERRUN_TEST_REDIS_TLS=127.0.0.1:PORT (TLS only, no plain
#                   port; the caller puts ca.crt, server.crt, server.key in
#                   DIR/tls first; client certificates are not required)
#                   LEADERRUN_TEST_REDIS_TLS_PID=PID
#       DIR/pids lists every PID started, one a line.
#   scripts/redis.sh stop DIR
#       SIGTERM (then SIGKILL) the PIDs in DIR/pids that are still redis-server.
#   scripts/redis.sh with -- COMMAND [ARGS...]
#       Start single, cluster and sentinel in a temp dir, export their env,
#       run COMMAND, stop everything, exit with COMMAND's status.
#
# redis-server comes from the Debian package redis-server; it is installed
# with apt-get when missing.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

ensure_redis() { apt_ensure redis-server redis-cli -- redis-server; }

# redis_port: sets port to one that looks free, 20000-29999, with its
# cluster bus port (port+10000) free too.
redis_port() { free_port 20000 10000 10000; }

# wait_ping PORT: until redis on PORT answers PING (about 10 s at most).
wait_ping() {
	local i
	for i in $(seq 1 200); do
		if [ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null || true)" = PONG ]; then
			return 0
		fi
		sleep 0.05
	done
	return 1
}

# read_pid FILE: the PID daemonized redis wrote (waits a little for it).
read_pid() {
	local i
	for i in $(seq 1 100); do
		if [ -s "$1" ]; then
			cat "$1"
			return
		fi
		sleep 0.05
	done
	die "no pid file $1"
}

# server DIR NAME [redis-server args...]: start one daemonized server on a
# free port; prints "PORT PID". Retries on a port race.
server() {
	local dir=$1 name=$2 port pid try
	shift 2
	for try in 1 2 3 4 5; do
		redis_port
		mkdir -p "$dir/$name-$port"
		if redis-server "$@" --port "$port" --bind 127.0.0.1 --protected-mode yes \
			--daemonize yes --pidfile "$dir/$name-$port/redis.pid" \
			--logfile "$dir/$name-$port/redis.log" --dir "$dir/$name-$port" \
			--save '' --appendonly no >/dev/null 2>&1 && wait_ping "$port"; then
			pid=$(read_pid "$dir/$name-$port/redis.pid")
			echo "$pid" >>"$dir/pids"
			echo "$port $pid"
			return
		fi
		if [ -s "$dir/$name-$port/redis.pid" ]; then
			kill_pid "$(cat "$dir/$name-$port/redis.pid")"
		fi
	done
	die "could not start redis-server (see $dir/$name-*/redis.log)"
}

# kill_pid PID: stop PID if it is still a redis-server process.
kill_pid() {
	local pid=$1
	[ -r "/proc/$pid/cmdline" ] || return 0
	tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'redis-server' || return 0
	# Throw-away servers with nothing to save: do not wait out a slow shutdown.
	stop_pid "$pid" TERM 6
}

start_single() {
	local dir=$1 port pid
	read -r port pid < <(server "$dir" single)
	{
		echo "LEADERRUN_TEST_REDIS=127.0.0.1:$port"
		echo "LEADERRUN_TEST_REDIS_PID=$pid"
	} >>"$dir/env"
}

start_cluster() {
	local dir=$1 port pid addrs=() pids=() i
	for i in 1 2 3; do
		read -r port pid < <(server "$dir" cluster --cluster-enabled yes \
			--cluster-config-file nodes.conf --cluster-node-timeout 2000)
		addrs+=("127.0.0.1:$port")
		pids+=("$pid")
	done
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes \
		>"$dir/cluster-create.log" 2>&1 || die "cluster create failed (see $dir/cluster-create.log)"
	for i in $(seq 1 200); do
		if redis-cli -h 127.0.0.1 -p "${addrs[0]#*:}" cluster info 2>/dev/null | grep -q 'cluster_state:ok'; then
			break
		fi
		sleep 0.05
	done
	redis-cli -h 127.0.0.1 -p "${addrs[0]#*:}" cluster info | grep -q 'cluster_state:ok' ||
		die "cluster did not become ok"
	local IFS=,
	{
		echo "LEADERRUN_TEST_REDIS_CLUSTER=${addrs[*]}"
		echo "LEADERRUN_TEST_REDIS_CLUSTER_PIDS=${pids[*]}"
	} >>"$dir/env"
}

start_sentinel() {
	local dir=$1 mport mpid sport spid conf i
	read -r mport mpid < <(server "$dir" master)
	mkdir -p "$dir/sentinel"
	conf=$dir/sentinel/sentinel.conf
	cat >"$conf" <<EOF
sentinel resolve-hostnames no
sentinel monitor leaderrun-test 127.0.0.1 $mport 1
sentinel down-after-milliseconds leaderrun-test 5000
sentinel failover-timeout leaderrun-test 10000
EOF
	read -r sport spid < <(server "$dir" sentinel "$conf" --sentinel)
	for i in $(seq 1 200); do
		if redis-cli -h 127.0.0.1 -p "$sport" sentinel get-master-addr-by-name leaderrun-test 2>/dev/null | grep -q "$mport"; then
			break
		fi
		sleep 0.05
	done
	{
		echo "LEADERRUN_TEST_REDIS_SENTINEL=127.0.0.1:$sport"
		echo "LEADERRUN_TEST_REDIS_SENTINEL_MASTER=leaderrun-test"
		echo "LEADERRUN_TEST_REDIS_SENTINEL_PIDS=$mpid,$spid"
	} >>"$dir/env"
}

start_tls() {
	local dir=$1 port pid d i
	for i in ca.crt server.crt server.key; do
		[ -s "$dir/tls/$i" ] || die "tls: put ca.crt, server.crt and server.key in $dir/tls first"
	done
	redis_port
	d=$dir/tls-$port
	mkdir -p "$d"
	redis-server --port 0 --tls-port "$port" --bind 127.0.0.1 --protected-mode yes \
		--tls-cert-file "$dir/tls/server.crt" --tls-key-file "$dir/tls/server.key" \
		--tls-ca-cert-file "$dir/tls/ca.crt" --tls-auth-clients no \
		--daemonize yes --pidfile "$d/redis.pid" --logfile "$d/redis.log" --dir "$d" \
		--save '' --appendonly no >/dev/null 2>&1 || die "tls: redis-server failed (see $d/redis.log)"
	pid=$(read_pid "$d/redis.pid")
	echo "$pid" >>"$dir/pids"
	for i in $(seq 1 200); do
		if [ "$(redis-cli --tls --cacert "$dir/tls/ca.crt" -h 127.0.0.1 -p "$port" ping 2>/dev/null || true)" = PONG ]; then
			{
				echo "LEADERRUN_TEST_REDIS_TLS=127.0.0.1:$port"
				echo "LEADERRUN_TEST_REDIS_TLS_PID=$pid"
			} >>"$dir/env"
			return
		fi
		sleep 0.05
	done
	die "tls: redis-server on $port does not answer (see $d/redis.log)"
}

cmd_start() {
	[ $# -ge 1 ] || die "usage: redis.sh start DIR [single|cluster|sentinel|tls]"
	local dir=$1 topo=${2:-single}
	ensure_redis
	mkdir -p "$dir"
	dir=$(cd "$dir" && pwd)
	case $topo in
	single) start_single "$dir" ;;
	cluster) start_cluster "$dir" ;;
	sentinel) start_sentinel "$dir" ;;
	tls) start_tls "$dir" ;;
	*) die "unknown topology $topo (want single, cluster, sentinel or tls)" ;;
	esac
}

cmd_stop() {
	[ $# -eq 1 ] || die "usage: redis.sh stop DIR"
	stop_listed "$1" kill_pid
}

cmd_with() {
	[ "${1:-}" = -- ] && shift
	[ $# -ge 1 ] || die "usage: redis.sh with -- COMMAND [ARGS...]"
	local rc=0
	with_dir=$(mktemp -d)
	trap 'cmd_stop "$with_dir/single"; cmd_stop "$with_dir/cluster"; cmd_stop "$with_dir/sentinel"; rm -rf "$with_dir"' EXIT
	local dir=$with_dir
	cmd_start "$dir/single" single
	cmd_start "$dir/cluster" cluster
	cmd_start "$dir/sentinel" sentinel
	set -a
	# shellcheck disable=SC1091
	. "$dir/single/env"
	. "$dir/cluster/env"
	. "$dir/sentinel/env"
	set +a
	"$@" || rc=$?
	return "$rc"
}

case ${1:-} in
start) shift; cmd_start "$@" ;;
stop) shift; cmd_stop "$@" ;;
with) shift; cmd_with "$@" ;;
*) die "usage: redis.sh start DIR [single|cluster|sentinel|tls] | stop DIR | with -- COMMAND" ;;
esac
