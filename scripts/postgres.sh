#!/usr/bin/env bash
# postgres.sh starts and stops a throw-away PostgreSQL server for leaderrun's
# tests. It listens on 127.0.0.1 only (and a unix socket in its own
# directory), and is stopped by the PID it recorded (never by process name).
#
#   scripts/postgres.sh start DIR [MAX_CONNECTIONS]
#       initdb a new cluster (max_connections MAX_CONNECTIONS, default 200), start it on a free port, wait until it accepts
#       connections, and write DIR/env:
#         LEADERRUN_TEST_POSTGRES_URL=postgres://leaderrun:PASSWORD@127.0.0.1:PORT/postgres?sslmode=disable
#         LEADERRUN_TEST_POSTGRES_PID=PID      (the postmaster)
#         LEADERRUN_TEST_POSTGRES_SOCKET=DIR   (the unix socket's directory)
#       Each backend runs in a session of its own, so to freeze or kill the
#       whole server signal the postmaster and its children (the tests'
#       leasetest.SignalServer does).
#       The role leaderrun is the superuser; the password is random and
#       authentication is scram-sha-256 (so tests can check it is never
#       printed). DIR/pids lists the PID; DIR/rundir names the directory that
#       holds the data and the unix socket.
#   scripts/postgres.sh restart DIR
#       start DIR's cluster again on its port after it crashed or was killed
#       (its data is kept), append the new PID to DIR/pids and update
#       LEADERRUN_TEST_POSTGRES_PID in DIR/env (the chaos run uses it).
#   scripts/postgres.sh stop DIR
#       SIGINT (fast shutdown; then SIGKILL) the PID in DIR/pids if it is
#       still a postgres process, and remove the run directory.
#
# The server refuses to run as root, so as root the cluster belongs to the
# system user leaderrun-pg (created when missing) and lives in its own
# directory under /tmp that this user owns (DIR itself may sit in a 0700
# directory of root's). The binaries come from the Debian package postgresql
# (/usr/lib/postgresql/VERSION/bin); it is installed with apt-get when missing.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

pg_user=leaderrun-pg

# find_bin: the directory holding initdb, pg_ctl and postgres.
find_bin() {
	local d
	if command -v initdb >/dev/null && command -v pg_ctl >/dev/null && command -v postgres >/dev/null; then
		dirname "$(command -v initdb)"
		return
	fi
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
		if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ]; then
			echo "$d"
			return
		fi
	done
	return 1
}

ensure_postgres() {
	if bin=$(find_bin); then
		return
	fi
	apt_ensure -- postgresql
	bin=$(find_bin) || die "initdb, pg_ctl and postgres not found after installing postgresql"
}

# children PID: the PIDs whose parent is PID (the server's backends and
# helpers; each runs in a session of its own).
children() {
	local f
	for f in /proc/[0-9]*/stat; do
		[ "$(sed 's/.*) //' "$f" 2>/dev/null | cut -d' ' -f2)" = "$1" ] && basename "$(dirname "$f")"
	done
	return 0
}

# kill_pid PID: stop PID if it is still a postgres process.
kill_pid() {
	local pid=$1 c
	[ -r "/proc/$pid/comm" ] || return 0
	grep -qx 'postgres' "/proc/$pid/comm" || return 0
	# A test may have frozen the server (the postmaster and its children).
	for c in $(children "$pid"); do
		kill -CONT "$c" 2>/dev/null || true
	done
	stop_pid "$pid" INT 100 # SIGINT, fast shutdown: do not wait for clients
}

# pg_start RUN PORT: start the cluster in RUN on PORT, with the
# max_connections in RUN/max_connections; prints the PID.
pg_start() {
	local run=$1 port=$2 maxconn
	maxconn=$(cat "$run/max_connections")
	# fsync off: a throw-away cluster whose data nobody needs after a crash of
	# the machine (a crash of the server alone loses nothing committed).
	as_user "$pg_user" "$bin/pg_ctl" -D "$run/data" -l "$run/server.log" -w -t 30 \
		-o "-c listen_addresses=127.0.0.1 -p $port -k $run -c fsync=off -c full_page_writes=off -c max_connections=$maxconn" \
		start >/dev/null 2>&1 || return 1
	head -n 1 "$run/data/postmaster.pid"
}

cmd_start() {
	[ $# -eq 1 ] || [ $# -eq 2 ] || die "usage: postgres.sh start DIR [MAX_CONNECTIONS]"
	local dir=$1 maxconn=${2:-200} run port pid pw try
	case $maxconn in '' | *[!0-9]*) die "MAX_CONNECTIONS must be a number, not $maxconn" ;; esac
	ensure_postgres
	ensure_system_user "$pg_user"
	run=$(new_rundir "$dir" leaderrun-pg)
	dir=$(cd "$dir" && pwd)
	pw=$(random_password)
	printf '%s\n' "$pw" >"$run/pwfile"
	echo "$maxconn" >"$run/max_connections"
	own_rundir "$run" "$pg_user"
	as_user "$pg_user" "$bin/initdb" -D "$run/data" -U leaderrun --pwfile="$run/pwfile" \
		--auth=scram-sha-256 --no-sync --no-instructions -E UTF8 --locale=C \
		>"$run/initdb.log" 2>&1 || die "initdb failed (see $run/initdb.log)"
	rm -f "$run/pwfile"
	for try in 1 2 3 4 5; do
		free_port 30000 10000
		if pid=$(pg_start "$run" "$port"); then
			echo "$pid" >>"$dir/pids"
			echo "$port" >"$dir/port"
			{
				echo "LEADERRUN_TEST_POSTGRES_URL=postgres://leaderrun:$pw@127.0.0.1:$port/postgres?sslmode=disable"
				echo "LEADERRUN_TEST_POSTGRES_PID=$pid"
				echo "LEADERRUN_TEST_POSTGRES_SOCKET=$run"
			} >>"$dir/env"
			return
		fi
		if [ -s "$run/data/postmaster.pid" ]; then
			kill_pid "$(head -n 1 "$run/data/postmaster.pid")"
		fi
	done
	die "could not start postgres (see $run/server.log)"
}

cmd_restart() {
	[ $# -eq 1 ] || die "usage: postgres.sh restart DIR"
	local dir=$1 run port pid
	bin=$(find_bin) || die "postgres is not installed"
	run=$(cat "$dir/rundir") && port=$(cat "$dir/port") || die "$dir was not made by postgres.sh start"
	# A killed postmaster may stay a zombie (PID 1 of a container need not
	# reap it), which postgres takes for a live one: its lock file goes.
	if [ -s "$run/data/postmaster.pid" ]; then
		pid=$(head -n 1 "$run/data/postmaster.pid")
		alive "$pid" && die "postgres (PID $pid) is still running"
		rm -f "$run/data/postmaster.pid" "$run/.s.PGSQL.$port.lock"
	fi
	pid=$(pg_start "$run" "$port") || die "could not start postgres again (see $run/server.log)"
	record_pid "$dir" LEADERRUN_TEST_POSTGRES_PID "$pid"
	echo "$pid"
}

cmd_stop() {
	[ $# -eq 1 ] || die "usage: postgres.sh stop DIR"
	stop_rundir "$1" leaderrun-pg
}

dispatch "postgres.sh start DIR | restart DIR | stop DIR" "$@"
