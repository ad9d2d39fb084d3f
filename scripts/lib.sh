# shellcheck shell=bash
# lib.sh holds what the server scripts (redis.sh, etcd.sh, postgres.sh,
# mariadb.sh, versitygw.sh, fakegcs.sh, ...) share: messages, installing
# Debian packages, building a pinned Go program, picking free ports on
# 127.0.0.1, starting a server on one and waiting for it, and stopping a
# server by PID. Source it; it defines functions only.

# die MSG...: print "SCRIPT: MSG" on stderr and exit 1.
die() { echo "${0##*/}: $*" >&2; exit 1; }

# dispatch USAGE [COMMAND [ARGS...]]: run the script's cmd_COMMAND ARGS...;
# die with "usage: USAGE" when the script has no such function.
dispatch() {
	local usage=$1
	shift
	[ $# -gt 0 ] && declare -F "cmd_$1" >/dev/null || die "usage: $usage"
	"cmd_$1" "${@:2}"
}

# apt_ensure [CHECK...] -- PACKAGE...: install the packages with apt-get,
# without their recommended packages (which can start services: prometheus
# recommends a node exporter listening on :9100), unless there are CHECKs
# and every one is there: a command on PATH, or a file for a CHECK that
# starts with /. Dies when a CHECK is still missing after.
apt_ensure() {
	local checks=() c
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		checks+=("$1")
		shift
	done
	shift
	if [ ${#checks[@]} -gt 0 ]; then
		for c in "${checks[@]}" ""; do
			[ -z "$c" ] && return 0 # every one is there
			have "$c" || break
		done
	fi
	echo "${0##*/}: installing $*" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y --no-install-recommends "$@" >/dev/null 2>&1 || {
		apt-get update >/dev/null
		apt-get install -y --no-install-recommends "$@" >/dev/null
	}
	for c in "${checks[@]}"; do
		have "$c" || die "$c not found after installing $*"
	done
}

# have CHECK: CHECK is a file (when it starts with /) or a command on PATH.
have() {
	case $1 in
	/*) [ -e "$1" ] ;;
	*) command -v "$1" >/dev/null ;;
	esac
}

# apt_extract CMD PACKAGE: make CMD, a program of the Debian package
# PACKAGE, available in .tools/bin (put on PATH here) without installing
# the package: apt-get download, then only /usr/bin/CMD out of it. For a
# program whose package would start a service (promtool: Debian has no
# package of it alone, and prometheus starts a server on :9090). Needs no
# root. Does nothing when CMD is on PATH already.
apt_extract() {
	local cmd=$1 pkg=$2 tools tmp
	tools=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.tools
	case ":$PATH:" in
	*":$tools/bin:"*) ;;
	*) PATH=$tools/bin:$PATH ;;
	esac
	have "$cmd" && return 0
	echo "${0##*/}: extracting $cmd from the Debian package $pkg into .tools/bin (the package is not installed: it would start a service)" >&2
	tmp=$(mktemp -d)
	if ! (cd "$tmp" && { apt-get download "$pkg" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get download "$pkg" >/dev/null; }; } &&
		dpkg-deb -x "$pkg"_*.deb x && [ -x "x/usr/bin/$cmd" ]); then
		rm -rf "$tmp"
		die "could not extract /usr/bin/$cmd from the Debian package $pkg"
	fi
	mkdir -p "$tools/bin"
	mv "$tmp/x/usr/bin/$cmd" "$tools/bin/$cmd"
	rm -rf "$tmp"
}

# go_build CACHE NAME PACKAGE VERSION: build the Go program PACKAGE (its
# binary NAME) at vVERSION into CACHE, niced, unless CACHE/NAME is there.
# Several scripts may start at once: one builds at a time (the lock
# CACHE.lock stays held by this shell).
go_build() {
	local cache=$1 name=$2 pkg=$3 version=$4
	[ -x "$cache/$name" ] && return 0
	command -v go >/dev/null || die "go not found: $name is built from its Go module"
	mkdir -p "$cache"
	exec 9>"$cache.lock"
	flock 9
	[ -x "$cache/$name" ] && return 0
	echo "${0##*/}: building $name $version into $cache" >&2
	GOBIN=$cache GOFLAGS=-buildvcs=false nice -n 10 go install "$pkg@v$version" >&2 ||
		die "go install $pkg@v$version failed"
	[ -x "$cache/$name" ] || die "$name missing after the build"
}

# port_answers PORT: something accepts connections on 127.0.0.1:PORT.
port_answers() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# port_free PORT: nothing listens on 127.0.0.1:PORT.
port_free() { ! port_answers "$1"; }

# free_port LOW SPAN [ALSO]: sets port to one in LOW..LOW+SPAN-1 that looks
# free (and PORT+ALSO too, when given) and was not handed out before by this
# shell (in $taken).
taken=" "
free_port() {
	local low=$1 span=$2 also=${3:-} p i
	for i in $(seq 1 200); do
		p=$((low + RANDOM % span))
		if [[ $taken != *" $p "* ]] && port_free "$p" && { [ -z "$also" ] || port_free $((p + also)); }; then
			taken+="$p "
			port=$p
			return
		fi
	done
	die "no free port found"
}

# alive PID: PID exists and is not a zombie (daemonized servers are reaped
# by PID 1, which in a container may never do it).
alive() {
	local st
	st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
	[ -n "$st" ] && [ "$st" != Z ]
}

# wait_until PID TRIES PAUSE CMD...: run CMD up to TRIES times, PAUSE
# seconds apart, until it succeeds (0); 1 when PID exits first, 2 when the
# tries are up.
wait_until() {
	local pid=$1 tries=$2 pause=$3 i
	shift 3
	for i in $(seq 1 "$tries"); do
		"$@" && return 0
		alive "$pid" || return 1
		sleep "$pause"
	done
	return 2
}

# wait_answer PORT PID: wait up to 10 s for PORT to answer (0); 1 when
# PID exits first, 2 when the time is up.
wait_answer() { wait_until "$2" 200 0.05 port_answers "$1"; }

# serve_on_free_port NAME LOG DIR RUN [ARGS...]: start the server NAME on a
# free port: RUN PORT ARGS... starts it in the background (its PID in $!),
# which DIR/pids then lists; sets port and pid once PORT answers. A server
# that exits first (the port was taken?) or does not answer is stopped
# with the script's kill_pid PID, and another port tried; after five, print
# LOG and die.
serve_on_free_port() {
	local name=$1 log=$2 dir=$3 try
	shift 3
	for try in 1 2 3 4 5; do
		free_port 30000 10000
		"$1" "$port" "${@:2}"
		pid=$!
		echo "$pid" >>"$dir/pids"
		wait_answer "$port" "$pid" && return 0
		kill_pid "$pid"
	done
	cat "$log" >&2 || true
	die "$name did not start"
}

# serve_again NAME LOG DIR PIDVAR PORT RUN [ARGS...]: start the server NAME
# again on PORT, after it was killed: RUN PORT ARGS... starts it in the
# background (its PID in $!); record its PID (record_pid DIR PIDVAR), wait
# until PORT answers and print the PID. Dies when it exits first (see LOG)
# or does not answer.
serve_again() {
	local name=$1 log=$2 dir=$3 var=$4 port=$5 pid
	shift 5
	"$1" "$port" "${@:2}"
	pid=$!
	record_pid "$dir" "$var" "$pid"
	wait_answer "$port" "$pid" || case $? in
	1) die "$name did not start again (see $log)" ;;
	*) die "$name did not answer again on port $port" ;;
	esac
	echo "$pid"
}

# record_pid DIR VAR PID: a server's new PID after a restart: append it to
# DIR/pids (for stop) and make it VAR's value in DIR/env.
record_pid() {
	echo "$3" >>"$1/pids"
	sed -i "s/^$2=.*/$2=$3/" "$1/env"
}

# stop_pid PID SIGNAL TRIES: wake PID (a test may have frozen it with
# SIGSTOP), send SIGNAL, wait up to TRIES×50 ms for it to end, then SIGKILL
# it and wait up to 2 s more. The caller checks first that PID is still its
# server (PIDs are reused).
stop_pid() {
	local pid=$1 sig=$2 tries=$3 i
	kill -CONT "$pid" 2>/dev/null || true
	kill -"$sig" "$pid" 2>/dev/null || return 0
	for i in $(seq 1 "$tries"); do
		alive "$pid" || return 0
		sleep 0.05
	done
	kill -KILL "$pid" 2>/dev/null || true
	for i in $(seq 1 100); do
		alive "$pid" || return 0
		sleep 0.02
	done
}

# stop_listed DIR KILL-FN [ARGS...]: KILL-FN [ARGS...] PID for every PID in
# DIR/pids, then empty the list.
stop_listed() {
	local dir=$1 pid
	shift
	[ -f "$dir/pids" ] || return 0
	while read -r pid; do
		[ -n "$pid" ] && "$@" "$pid"
	done <"$dir/pids"
	: >"$dir/pids"
}

# as_user USER CMD...: run CMD as USER when root (runuser), else as this
# user.
as_user() {
	local user=$1
	shift
	if [ "$(id -u)" -eq 0 ]; then
		runuser -u "$user" -- "$@"
	else
		"$@"
	fi
}

# ensure_system_user USER: as root, create the system user USER (no home,
# no login shell) unless it exists.
ensure_system_user() {
	[ "$(id -u)" -eq 0 ] || return 0
	id -u "$1" >/dev/null 2>&1 && return 0
	useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin "$1" 2>/dev/null ||
		id -u "$1" >/dev/null 2>&1 || die "cannot create the system user $1"
}

# new_rundir DIR PREFIX: make DIR and a new directory /tmp/PREFIX.XXXXXX
# (DIR/rundir names it) for a server's data and socket, which its user
# can reach (DIR itself may sit in a 0700 directory of root's); print its
# path.
new_rundir() {
	local run
	mkdir -p "$1"
	run=$(mktemp -d "/tmp/$2.XXXXXX")
	echo "$run" >"$1/rundir"
	echo "$run"
}

# own_rundir RUN USER: give RUN to USER (as root) and make it private.
own_rundir() {
	if [ "$(id -u)" -eq 0 ]; then
		chown -R "$2:" "$1"
	fi
	chmod 700 "$1"
}

# stop_rundir DIR PREFIX: stop each PID of DIR/pids with the script's
# kill_pid PID, and remove the run directory DIR/rundir names (a
# /tmp/PREFIX.* one).
stop_rundir() {
	local run
	[ -f "$1/pids" ] || return 0
	stop_listed "$1" kill_pid
	if [ -f "$1/rundir" ]; then
		run=$(cat "$1/rundir")
		case $run in
		/tmp/"$2".*) rm -rf "$run" ;;
		esac
		rm -f "$1/rundir"
	fi
}

# random_password: 24 random letters and digits.
random_password() {
	head -c 64 /dev/urandom | base64 | tr -dc 'A-Za-z0-9' | head -c 24
}
