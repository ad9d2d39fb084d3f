#!/usr/bin/env bash
# fakegcs.sh builds, starts and stops a throw-away Google Cloud Storage
# emulator (fake-gcs-server, over a directory) for leaderrun's GCS tests.
# It listens on 127.0.0.1 only (plain HTTP) and is stopped by the PID it
# recorded (never by process name).
#
#   scripts/fakegcs.sh build
#       build fake-gcs-server (pinned) from its Go module into
#       ${XDG_CACHE_HOME:-~/.cache}/leaderrun/fake-gcs-server-VERSION/
#       (niced; a few minutes the first time, nothing afterwards). Debian
#       has no package of it.
#   scripts/fakegcs.sh start DIR
#       build when missing, start fake-gcs-server on a free port with its
#       filesystem backend over DIR/data and the bucket leases (a
#       directory of DIR/data), and write DIR/env:
#         LEADERRUN_TEST_GCS_EMULATOR_HOST=127.0.0.1:PORT   (STORAGE_EMULATOR_HOST's value)
#         LEADERRUN_TEST_GCS_BUCKET=leases
#         LEADERRUN_TEST_GCS_PID=PID
#       DIR/pids lists the PID.
#   scripts/fakegcs.sh restart DIR
#       start DIR's server again on its port over its data, after it was
#       killed; append the new PID to DIR/pids and update
#       LEADERRUN_TEST_GCS_PID in DIR/env.
#   scripts/fakegcs.sh stop DIR
#       SIGTERM (then SIGKILL) the PIDs in DIR/pids that are still
#       fake-gcs-server.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "$0")/lib.sh"

FAKEGCS_VERSION=1.56.1
cache=${XDG_CACHE_HOME:-$HOME/.cache}/leaderrun/fake-gcs-server-$FAKEGCS_VERSION
bin=$cache/fake-gcs-server

cmd_build() {
	go_build "$cache" fake-gcs-server github.com/fsouza/fake-gcs-server "$FAKEGCS_VERSION"
}

# run PORT DIR: start the server in the background (its PID in $!).
run() {
	"$bin" -scheme http -host 127.0.0.1 -port "$1" -backend filesystem -filesystem-root "$2/data" \
		-external-url "http://127.0.0.1:$1" -log-level error >>"$2/fakegcs.log" 2>&1 </dev/null &
}

cmd_start() {
	[ $# -eq 1 ] || die "usage: fakegcs.sh start DIR"
	local dir=$1 pid
	cmd_build
	mkdir -p "$dir/data/leases"
	serve_on_free_port fake-gcs-server "$dir/fakegcs.log" "$dir" run "$dir"
	{
		echo "LEADERRUN_TEST_GCS_EMULATOR_HOST=127.0.0.1:$port"
		echo "LEADERRUN_TEST_GCS_BUCKET=leases"
		echo "LEADERRUN_TEST_GCS_PID=$pid"
	} >"$dir/env"
	echo "fakegcs.sh: fake-gcs-server $FAKEGCS_VERSION (pid $pid) on http://127.0.0.1:$port" >&2
}

cmd_restart() {
	[ $# -eq 1 ] || die "usage: fakegcs.sh restart DIR"
	local dir=$1 host
	host=$(sed -n 's/^LEADERRUN_TEST_GCS_EMULATOR_HOST=//p' "$dir/env")
	port=${host##*:}
	[[ "$port" =~ ^[0-9]+$ ]] || die "$dir was not made by fakegcs.sh start"
	serve_again fake-gcs-server "$dir/fakegcs.log" "$dir" LEADERRUN_TEST_GCS_PID "$port" run "$dir"
}

# kill_pid PID: stop PID if it is still fake-gcs-server (its comm is cut
# to 15 characters).
kill_pid() {
	grep -qx 'fake-gcs-server' "/proc/$1/comm" 2>/dev/null || return 0
	stop_pid "$1" TERM 100
}

cmd_stop() {
	[ $# -eq 1 ] || die "usage: fakegcs.sh stop DIR"
	stop_listed "$1" kill_pid
}

dispatch "$0 build | start DIR | restart DIR | stop DIR" "$@"
