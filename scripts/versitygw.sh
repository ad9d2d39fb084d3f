#!/usr/bin/env bash
# versitygw.sh builds, starts and stops a throw-away S3 gateway (versitygw,
# over a directory) for leaderrun's S3 tests. It listens on 127.0.0.1 only
# and is stopped by the PID it recorded (never by process name).
#
#   scripts/versitygw.sh build
#       build versitygw (pinned) from its Go module into
#       ${XDG_CACHE_HOME:-~/.cache}/leaderrun/versitygw-VERSION/ (niced; a
#       few minutes and a few hundred MB of Go build cache the first time,
#       nothing afterwards). Debian has no package of it.
#   scripts/versitygw.sh start DIR
#       build when missing, start versitygw on a free port over DIR/data
#       (metadata in DIR/meta), with a random root access key and secret
#       (those of LEADERRUN_TEST_S3_ACCESS_KEY and _SECRET_KEY when set)
#       and the bucket leases (a directory of DIR/data), and write DIR/env:
#         LEADERRUN_TEST_S3_ENDPOINT=http://127.0.0.1:PORT
#         LEADERRUN_TEST_S3_BUCKET=leases
#         LEADERRUN_TEST_S3_ACCESS_KEY=KEY
#         LEADERRUN_TEST_S3_SECRET_KEY=SECRET   (random: tests check it is never printed)
#         LEADERRUN_TEST_S3_PID=PID
#       DIR/pids lists the PID.
#   scripts/versitygw.sh restart DIR
#       start DIR's gateway again on its port, with its keys and its data,
#       after it was killed; append the new PID to DIR/pids and update
#       LEADERRUN_TEST_S3_PID in DIR/env (scripts/chaos.sh's restarts).
#   scripts/versitygw.sh stop DIR
#       SIGTERM (then SIGKILL) the PID in DIR/pids if it is still versitygw.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

VERSITYGW_VERSION=1.8.0
cache=${XDG_CACHE_HOME:-$HOME/.cache}/leaderrun/versitygw-$VERSITYGW_VERSION
bin=$cache/versitygw

cmd_build() {
	go_build "$cache" versitygw github.com/versity/versitygw/cmd/versitygw "$VERSITYGW_VERSION"
}

# run PORT DIR KEY SECRET: start the gateway in the background (its PID in
# $!).
run() {
	ROOT_ACCESS_KEY_ID=$3 ROOT_SECRET_ACCESS_KEY=$4 \
		"$bin" --port "127.0.0.1:$1" --quiet posix --sidecar "$2/meta" "$2/data" \
		>>"$2/versitygw.log" 2>&1 </dev/null &
}

cmd_start() {
	[ $# -eq 1 ] || die "usage: versitygw.sh start DIR"
	local dir=$1 key secret pid
	cmd_build
	mkdir -p "$dir/data/leases" "$dir/meta"
	# A test's private gateway takes the shared one's keys (in its
	# environment), so that the same credentials reach both.
	key=${LEADERRUN_TEST_S3_ACCESS_KEY:-lrtest$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')}
	secret=${LEADERRUN_TEST_S3_SECRET_KEY:-$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')}
	serve_on_free_port versitygw "$dir/versitygw.log" "$dir" run "$dir" "$key" "$secret"
	{
		echo "LEADERRUN_TEST_S3_ENDPOINT=http://127.0.0.1:$port"
		echo "LEADERRUN_TEST_S3_BUCKET=leases"
		echo "LEADERRUN_TEST_S3_ACCESS_KEY=$key"
		echo "LEADERRUN_TEST_S3_SECRET_KEY=$secret"
		echo "LEADERRUN_TEST_S3_PID=$pid"
	} >"$dir/env"
	echo "versitygw.sh: versitygw $VERSITYGW_VERSION (pid $pid) on http://127.0.0.1:$port" >&2
}

cmd_restart() {
	[ $# -eq 1 ] || die "usage: versitygw.sh restart DIR"
	local dir=$1 endpoint key secret
	endpoint=$(sed -n 's/^LEADERRUN_TEST_S3_ENDPOINT=//p' "$dir/env")
	key=$(sed -n 's/^LEADERRUN_TEST_S3_ACCESS_KEY=//p' "$dir/env")
	secret=$(sed -n 's/^LEADERRUN_TEST_S3_SECRET_KEY=//p' "$dir/env")
	port=${endpoint##*:}
	[[ "$port" =~ ^[0-9]+$ ]] && [ -n "$key" ] || die "$dir was not made by versitygw.sh start"
	serve_again versitygw "$dir/versitygw.log" "$dir" LEADERRUN_TEST_S3_PID "$port" run "$dir" "$key" "$secret"
}

# kill_pid PID: stop PID if it is still versitygw.
kill_pid() {
	grep -qx versitygw "/proc/$1/comm" 2>/dev/null || return 0
	stop_pid "$1" TERM 100
}

cmd_stop() {
	[ $# -eq 1 ] || die "usage: versitygw.sh stop DIR"
	stop_listed "$1" kill_pid
}

dispatch "$0 build | start DIR | restart DIR | stop DIR" "$@"
