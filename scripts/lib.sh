# shellcheck shell=bash
# lib.sh holds what redis.sh, etcd.sh and postgres.sh share: messages,
# installing Debian packages, picking free ports on 127.0.0.1, and stopping
# a server by PID. Source it; it defines functions only.

# die MSG...: print "SCRIPT: MSG" on stderr and exit 1.
die() { echo "${0##*/}: $*" >&2; exit 1; }

# apt_ensure [CHECK-CMD...] -- PACKAGE...: install the packages with apt-get
# unless there are CHECK-CMDs and every one is on PATH; die when one is
# still missing after.
apt_ensure() {
	local cmds=() c
	while [ $# -gt 0 ] && [ "$1" != -- ]; do
		cmds+=("$1")
		shift
	done
	shift
	if [ ${#cmds[@]} -gt 0 ]; then
		for c in "${cmds[@]}" ""; do
			[ -z "$c" ] && return 0 # every one is there
			command -v "$c" >/dev/null || break
		done
	fi
	echo "${0##*/}: installing $*" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get install -y "$@" >/dev/null 2>&1 || {
		apt-get update >/dev/null
		apt-get install -y "$@" >/dev/null
	}
	for c in "${cmds[@]}"; do
		command -v "$c" >/dev/null || die "$c not found after install"
	done
}

# port_free PORT: nothing listens on 127.0.0.1:PORT.
port_free() {
	! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

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
