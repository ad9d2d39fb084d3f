#!/usr/bin/env bash
# mariadb.sh starts and stops a throw-away MariaDB server for leaderrun's
# tests. It listens on 127.0.0.1 only (and a unix socket in its own
# directory), and is stopped by the PID it recorded (never by process name).
#
#   scripts/mariadb.sh start DIR [MAX_CONNECTIONS [CERTDIR]]
#       create a new data directory (max_connections MAX_CONNECTIONS,
#       default 200), start mariadbd on a free port (with TLS when CERTDIR
#       holds ca.crt, server.crt and server.key), wait until it accepts
#       connections, and write DIR/env:
#         LEADERRUN_TEST_MYSQL_URL=mysql://leaderrun:PASSWORD@127.0.0.1:PORT/leaderrun
#         LEADERRUN_TEST_MYSQL_PID=PID        (mariadbd)
#         LEADERRUN_TEST_MYSQL_SOCKET=PATH    (the unix socket)
#       The user leaderrun has every privilege (WITH GRANT OPTION, so tests
#       can make restricted users); its password is random (so tests can
#       check it is never printed). mariadbd is one process (threads, not
#       children): a signal to its PID freezes or kills the whole server.
#       DIR/pids lists the PID; DIR/rundir names the directory that holds
#       the data and the socket.
#   scripts/mariadb.sh restart DIR
#       start DIR's server again on its port after it crashed or was killed
#       (its data is kept), append the new PID to DIR/pids and update
#       LEADERRUN_TEST_MYSQL_PID in DIR/env.
#   scripts/mariadb.sh stop DIR
#       SIGTERM (then SIGKILL) the PID in DIR/pids if it is still mariadbd,
#       and remove the run directory.
#
# The binaries come from Debian's mariadb-server (installed with apt-get when
# missing; Debian's policy-rc.d, or none, decides whether the system service
# starts: this script never uses it). As root the server runs as the system
# user leaderrun-my (created when missing) in its own directory under /tmp.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

my_user=leaderrun-my

ensure_mariadb() {
	if ! command -v mariadbd >/dev/null && ! [ -x /usr/sbin/mariadbd ]; then
		# Debian's maintainer scripts start the system service unless
		# policy-rc.d says no: this script runs its own server instead.
		local policy=/usr/sbin/policy-rc.d made=""
		if [ "$(id -u)" -eq 0 ] && [ ! -e "$policy" ]; then
			printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 755 "$policy" && made=1
		fi
		apt_ensure -- mariadb-server || { [ -n "$made" ] && rm -f "$policy"; exit 1; }
		[ -n "$made" ] && rm -f "$policy"
	fi
	bin=$(command -v mariadbd || echo /usr/sbin/mariadbd)
	[ -x "$bin" ] || die "mariadbd not found after installing mariadb-server"
	command -v mariadb-install-db >/dev/null || die "mariadb-install-db not found"
	command -v mariadb >/dev/null || die "the mariadb client not found"
}

# kill_pid PID: stop PID if it is still mariadbd.
kill_pid() {
	local pid=$1
	[ -r "/proc/$pid/comm" ] || return 0
	grep -qx 'mariadbd' "/proc/$pid/comm" || return 0
	stop_pid "$pid" TERM 200
}

# my_start RUN PORT: start the server in RUN on PORT and wait until it
# answers on its socket; prints mariadbd's PID (from its pid file).
my_start() {
	local run=$1 port=$2 maxconn i pid starter
	maxconn=$(cat "$run/max_connections")
	local tls=()
	if [ -f "$run/tls/server.crt" ]; then
		tls=(--ssl-ca="$run/tls/ca.crt" --ssl-cert="$run/tls/server.crt" --ssl-key="$run/tls/server.key")
	fi
	rm -f "$run/mariadbd.pid"
	# No durability settings: a throw-away server whose data nobody needs
	# after a crash of the machine. No binary log, no performance schema:
	# start-up time and memory. The doublewrite buffer stays on: chaos
	# SIGKILLs the server and restarts it over its data, and a fatal
	# signal can cut a page write short (the kernel ends a write at a page
	# boundary when one is pending), a torn page that InnoDB, without the
	# doublewrite copy, cannot recover (a chaos restart once found
	# mariadbd unable to start again).
	# mariadbd itself, not under runuser: runuser stops itself when its
	# child is stopped (a test's SIGSTOP) and, left stopped, never reaps it.
	# As root, --user makes mariadbd drop to the server user.
	local user_opt=()
	[ "$(id -u)" -eq 0 ] && user_opt=(--user="$my_user")
	"$bin" --no-defaults "${user_opt[@]}" --datadir="$run/data" --tmpdir="$run/tmp" --socket="$run/mysqld.sock" \
		--port="$port" --bind-address=127.0.0.1 --pid-file="$run/mariadbd.pid" \
		--log-error="$run/server.log" --skip-name-resolve --max-connections="$maxconn" \
		--innodb-buffer-pool-size=64M --innodb-flush-log-at-trx-commit=2 \
		--performance-schema=0 --skip-log-bin --character-set-server=utf8mb4 "${tls[@]}" \
		</dev/null >>"$run/server.log" 2>&1 &
	starter=$!
	for i in $(seq 1 600); do
		if ! alive "$starter"; then
			return 1
		fi
		if mariadb --no-defaults -uroot --socket="$run/mysqld.sock" -e 'SELECT 1' >/dev/null 2>&1 &&
			pid=$(cat "$run/mariadbd.pid" 2>/dev/null) && [ -n "$pid" ]; then
			echo "$pid"
			return 0
		fi
		sleep 0.05
	done
	pid=$(cat "$run/mariadbd.pid" 2>/dev/null) && kill_pid "$pid"
	return 1
}

cmd_start() {
	[ $# -ge 1 ] && [ $# -le 3 ] || die "usage: mariadb.sh start DIR [MAX_CONNECTIONS [CERTDIR]]"
	local dir=$1 maxconn=${2:-200} certs=${3:-} run port pid pw try f
	case $maxconn in '' | *[!0-9]*) die "MAX_CONNECTIONS must be a number, not $maxconn" ;; esac
	ensure_mariadb
	ensure_system_user "$my_user"
	run=$(new_rundir "$dir" leaderrun-my)
	dir=$(cd "$dir" && pwd)
	pw=$(random_password)
	echo "$maxconn" >"$run/max_connections"
	if [ -n "$certs" ]; then
		mkdir "$run/tls"
		for f in ca.crt server.crt server.key; do
			cp "$certs/$f" "$run/tls/$f" || die "CERTDIR $certs has no $f"
		done
	fi
	own_rundir "$run" "$my_user"
	local user_opt=()
	[ "$(id -u)" -eq 0 ] && user_opt=(--user="$my_user")
	# A temporary directory of its own: servers bootstrapped at once in a
	# shared /tmp collide on their temporary tables' names.
	mkdir "$run/tmp"
	[ "$(id -u)" -eq 0 ] && chown "$my_user:" "$run/tmp"
	as_user "$my_user" mariadb-install-db --no-defaults --datadir="$run/data" --tmpdir="$run/tmp" "${user_opt[@]}" \
		--auth-root-authentication-method=normal --skip-test-db \
		>"$run/install.log" 2>&1 || die "mariadb-install-db failed (see $run/install.log)"
	for try in 1 2 3 4 5; do
		free_port 30000 10000
		if pid=$(my_start "$run" "$port"); then
			mariadb --no-defaults -uroot --socket="$run/mysqld.sock" <<-EOF || die "cannot create the test user"
				CREATE USER 'leaderrun'@'%' IDENTIFIED BY '$pw';
				CREATE USER 'leaderrun'@'localhost' IDENTIFIED BY '$pw';
				GRANT ALL PRIVILEGES ON *.* TO 'leaderrun'@'%' WITH GRANT OPTION;
				GRANT ALL PRIVILEGES ON *.* TO 'leaderrun'@'localhost' WITH GRANT OPTION;
				CREATE DATABASE leaderrun;
			EOF
			echo "$pid" >>"$dir/pids"
			echo "$port" >"$dir/port"
			{
				echo "LEADERRUN_TEST_MYSQL_URL=mysql://leaderrun:$pw@127.0.0.1:$port/leaderrun"
				echo "LEADERRUN_TEST_MYSQL_PID=$pid"
				echo "LEADERRUN_TEST_MYSQL_SOCKET=$run/mysqld.sock"
			} >>"$dir/env"
			return
		fi
	done
	die "could not start mariadbd (see $run/server.log)"
}

cmd_restart() {
	[ $# -eq 1 ] || die "usage: mariadb.sh restart DIR"
	local dir=$1 run port pid
	ensure_mariadb
	run=$(cat "$dir/rundir") && port=$(cat "$dir/port") || die "$dir was not made by mariadb.sh start"
	if [ -s "$run/mariadbd.pid" ]; then
		pid=$(cat "$run/mariadbd.pid")
		alive "$pid" && grep -qx mariadbd "/proc/$pid/comm" 2>/dev/null && die "mariadbd (PID $pid) is still running"
	fi
	pid=$(my_start "$run" "$port") || die "could not start mariadbd again (see $run/server.log)"
	record_pid "$dir" LEADERRUN_TEST_MYSQL_PID "$pid"
	echo "$pid"
}

cmd_stop() {
	[ $# -eq 1 ] || die "usage: mariadb.sh stop DIR"
	stop_rundir "$1" leaderrun-my
}

dispatch "mariadb.sh start DIR [MAX_CONNECTIONS [CERTDIR]] | restart DIR | stop DIR" "$@"
