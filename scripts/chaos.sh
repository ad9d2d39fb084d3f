#!/usr/bin/env bash
# chaos.sh: a randomised fault run with an independent checker.
#
#   scripts/chaos.sh [--store file|redis|azurite|postgres|mysql|etcd|kubernetes|s3|gcs] [--slots N] [--keep] [DURATION]
#
# 20 contenders take turns on one lease name, each a loop of the built
# `leaderrun … -- chaosrun child`. The child logs its start and end
# (CLOCK_MONOTONIC, its PID, its leaderrun's PID, LEADERRUN_LEASE_TOKEN) and writes
# every 15 ms to a fencing resource (a file that rejects a token below the
# highest it has seen, and logs each decision). For DURATION (default 10m)
# faults are injected at random, one at a time:
#   every store  SIGKILL of the holder's leaderrun or of a waiting one;
#                SIGSTOP/SIGCONT of the holder's leaderrun, shorter than the
#                TTL or longer than it
#   file         the lock file replaced (new inode, same content) or deleted
#   redis        server SIGSTOP/SIGCONT; server SIGKILL and restart with its
#                append-only file or with no data; the lease key deleted
#   azurite      server SIGSTOP/SIGCONT; server restart with its data
#                (SIGTERM, --location) or without (SIGKILL, data wiped);
#                the blob lease broken
#   postgres     server SIGSTOP/SIGCONT (the postmaster and every backend);
#                server SIGKILL and restart with its data; the lease row
#                deleted
#   s3           versitygw: gateway SIGSTOP/SIGCONT; gateway SIGKILL and restart
#                (its data on disk); lease object deleted or given another ID
#   gcs          fake-gcs-server: emulator SIGSTOP/SIGCONT; emulator SIGKILL
#                and restart (its data on disk); lease object deleted or
#                given another ID
#   mysql        MariaDB: server SIGSTOP/SIGCONT; server SIGKILL and restart
#                with its data; the lease row deleted, or its acquisition ID
#                edited
#   etcd         a three-member cluster: one member SIGSTOP/SIGCONT; one
#                member SIGKILLed and restarted with its data; the lease key
#                deleted
#   kubernetes   kube-apiserver SIGSTOP/SIGCONT; SIGKILLed and restarted (its
#                etcd keeps the data); the Lease deleted, or its
#                holderIdentity edited, with kubectl
# With --slots N (CHAOS_SLOTS) every leaderrun runs with --slots N: up to N
# children at once, each slot with its own fencing resource, and the check
# judges overlaps and token order per slot and tokens across slots; the
# store faults that name the lease's key (file, key, row, blob) hit slot 0.
# Then scripts/chaoscheck reads the logs and prints the totals; the script
# exits with its status (0 pass, 1 a finding, 2 unreadable logs).
#
# Servers are private (scripts/redis.sh, scripts/azurite.sh,
# scripts/postgres.sh, scripts/mariadb.sh, scripts/etcd.sh, scripts/kubernetes.sh,
# scripts/versitygw.sh, scripts/fakegcs.sh, 127.0.0.1 only)
# and stopped by PID. Logs are kept when the check fails or with --keep
# (CHAOS_KEEP=1). CHAOS_CONTENDERS, CHAOS_TTL and CHAOS_SEED override the
# defaults (20; 3s, or 15s on Azure; random); CHAOS_BIN names a directory
# with leaderrun, chaosrun and chaoscheck already built.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
export PATH="$PATH:/usr/local/go/bin"

store=file
duration=10m
keep=${CHAOS_KEEP:-0}
slots=${CHAOS_SLOTS:-1}
while [ $# -gt 0 ]; do
	case $1 in
	--store) store=${2:?--store needs file, redis, azurite, postgres, mysql, etcd, kubernetes, s3 or gcs}; shift 2 ;;
	--store=*) store=${1#--store=}; shift ;;
	--slots) slots=${2:?--slots needs a number}; shift 2 ;;
	--slots=*) slots=${1#--slots=}; shift ;;
	--keep) keep=1; shift ;;
	-h | --help) sed -n '2,/^set -e/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
	-*) echo "chaos.sh: unknown flag $1" >&2; exit 2 ;;
	*) duration=$1; shift ;;
	esac
done
case $store in
file | redis | postgres | mysql | etcd | kubernetes | s3 | gcs) ttl=${CHAOS_TTL:-3s} ;;
azurite) ttl=${CHAOS_TTL:-15s} ;;
*) echo "chaos.sh: --store must be file, redis, azurite, postgres, mysql, etcd, kubernetes, s3 or gcs" >&2; exit 2 ;;
esac

work=$(mktemp -d /tmp/leaderrun-chaos.XXXXXX)
driver=
cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	if [ -n "$driver" ] && kill -0 "$driver" 2>/dev/null; then
		# The driver stops its leaderrun processes itself (their children
		# die with them); SIGKILL only if it does not finish in 30 s.
		kill -TERM "$driver" 2>/dev/null || true
		for _ in $(seq 1 300); do
			kill -0 "$driver" 2>/dev/null || break
			sleep 0.1
		done
		kill -KILL "$driver" 2>/dev/null || true
		wait "$driver" 2>/dev/null || true
	fi
	[ -f "$work/redis/pids" ] && scripts/redis.sh stop "$work/redis" || true
	[ -f "$work/azurite/env" ] && scripts/azurite.sh stop "$work/azurite" || true
	[ -f "$work/postgres/pids" ] && scripts/postgres.sh stop "$work/postgres" || true
	[ -f "$work/mysql/pids" ] && scripts/mariadb.sh stop "$work/mysql" || true
	[ -f "$work/etcd/pids" ] && scripts/etcd.sh stop "$work/etcd" || true
	[ -f "$work/kubernetes/pids" ] && scripts/kubernetes.sh stop "$work/kubernetes" || true
	[ -f "$work/s3/pids" ] && scripts/versitygw.sh stop "$work/s3" || true
	[ -f "$work/gcs/pids" ] && scripts/fakegcs.sh stop "$work/gcs" || true
	if [ "$rc" -eq 0 ] && [ "$keep" != 1 ]; then
		rm -rf "$work"
	else
		echo "chaos.sh: logs kept in $work/logs" >&2
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$work/bin" "$work/logs"
if [ -n "${CHAOS_BIN:-}" ]; then
	# Prebuilt binaries (scripts/test.sh builds them once for three runs).
	for b in leaderrun chaosrun chaoscheck; do
		[ -x "$CHAOS_BIN/$b" ] || { echo "chaos.sh: no $CHAOS_BIN/$b" >&2; exit 2; }
		ln -s "$CHAOS_BIN/$b" "$work/bin/$b"
	done
else
	go build -o "$work/bin/" . ./cmd/... # leaderrun and its store programs
	go build -o "$work/bin/chaosrun" ./scripts/chaosrun
	go build -o "$work/bin/chaoscheck" ./scripts/chaoscheck
fi

args=(-dir "$work/logs" -store "$store" -leaderrun "$work/bin/leaderrun" -duration "$duration" -ttl "$ttl"
	-contenders "${CHAOS_CONTENDERS:-20}" -seed "${CHAOS_SEED:-0}" -slots "$slots")
case $store in
file)
	mkdir -p "$work/store"
	args+=(-url "file://$work/store")
	;;
redis)
	scripts/redis.sh start "$work/redis" single
	port=$(sed -n 's/^LEADERRUN_TEST_REDIS=127.0.0.1://p' "$work/redis/env")
	pid=$(sed -n 's/^LEADERRUN_TEST_REDIS_PID=//p' "$work/redis/env")
	args+=(-url "redis://127.0.0.1:$port" -redis-port "$port" -redis-pid "$pid" -redis-dir "$work/redis")
	unset REDISCLI_AUTH
	;;
azurite)
	export AZURITE_LOCATION=$work/azurite-data
	mkdir -p "$AZURITE_LOCATION"
	scripts/azurite.sh start "$work/azurite"
	endpoint=$(sed -n 's/^LEADERRUN_TEST_AZURITE=//p' "$work/azurite/env")
	bin=$(ls "$root"/.tools/azurite-*/node_modules/.bin/azurite-blob | tail -1)
	args+=(-url "azblob+${endpoint%/}/chaos?poll=500ms" -azurite-dir "$work/azurite" -azurite-bin "$bin")
	# The development account's published key, for leaderrun (AZURE_STORAGE_KEY
	# is read for the URL's account).
	export AZURE_STORAGE_KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
	unset AZURE_STORAGE_CONNECTION_STRING AZURE_STORAGE_ACCOUNT AZURE_STORAGE_SAS_TOKEN
	;;
postgres)
	scripts/postgres.sh start "$work/postgres"
	url=$(sed -n 's/^LEADERRUN_TEST_POSTGRES_URL=//p' "$work/postgres/env")
	args+=(-url "$url" -pg-dir "$work/postgres" -pg-scripts "$root/scripts")
	unset PGPASSWORD PGHOST PGPORT PGUSER PGDATABASE PGPASSFILE
	;;
mysql)
	scripts/mariadb.sh start "$work/mysql"
	url=$(sed -n 's/^LEADERRUN_TEST_MYSQL_URL=//p' "$work/mysql/env")
	args+=(-url "$url" -my-dir "$work/mysql" -my-scripts "$root/scripts")
	unset MYSQL_PWD
	;;
etcd)
	scripts/etcd.sh start "$work/etcd" cluster
	url=$(sed -n 's/^LEADERRUN_TEST_ETCD_CLUSTER_URL=//p' "$work/etcd/env")
	args+=(-url "$url" -etcd-dir "$work/etcd")
	unset ETCDCTL_USER ETCDCTL_PASSWORD
	;;
s3)
	scripts/versitygw.sh start "$work/s3"
	endpoint=$(sed -n 's/^LEADERRUN_TEST_S3_ENDPOINT=//p' "$work/s3/env")
	args+=(-url "s3://leases/chaos?endpoint=$endpoint" -s3-dir "$work/s3" -s3-scripts "$root/scripts")
	AWS_ACCESS_KEY_ID=$(sed -n 's/^LEADERRUN_TEST_S3_ACCESS_KEY=//p' "$work/s3/env")
	AWS_SECRET_ACCESS_KEY=$(sed -n 's/^LEADERRUN_TEST_S3_SECRET_KEY=//p' "$work/s3/env")
	export AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
	unset AWS_SESSION_TOKEN AWS_PROFILE
	;;
gcs)
	scripts/fakegcs.sh start "$work/gcs"
	host=$(sed -n 's/^LEADERRUN_TEST_GCS_EMULATOR_HOST=//p' "$work/gcs/env")
	args+=(-url "gs://leases/chaos" -gcs-dir "$work/gcs" -gcs-scripts "$root/scripts")
	export STORAGE_EMULATOR_HOST=$host
	unset GOOGLE_APPLICATION_CREDENTIALS
	;;
kubernetes)
	scripts/kubernetes.sh start "$work/kubernetes"
	kc=$(sed -n 's/^LEADERRUN_TEST_KUBECONFIG=//p' "$work/kubernetes/env")
	args+=(-url "kubernetes://default?kubeconfig=$kc" -kube-dir "$work/kubernetes")
	unset KUBECONFIG
	;;
esac

echo "chaos.sh: $store store, $duration of faults, ttl $ttl, $slots slot(s), logs in $work/logs" >&2
"$work/bin/chaosrun" run "${args[@]}" &
driver=$!
wait "$driver" || { echo "chaos.sh: driver failed" >&2; exit 2; }
driver=
"$work/bin/chaoscheck" "$work/logs"
