#!/bin/sh
# redis-lock.sh HOST:PORT COMMAND...: the shell lock on Redis that
# scripts/bench.sh compares leaderrun with: redis-cli SET NX PX, the
# command, redis-cli DEL (two redis-cli starts; no renewal, no fencing, no
# guard). Exits 75 when the lock is taken.
addr=$1
shift
host=${addr%:*}
port=${addr##*:}
[ "$(redis-cli -h "$host" -p "$port" SET leaderrun-bench-lock "$$" NX PX 15000)" = OK ] || exit 75
"$@"
rc=$?
redis-cli -h "$host" -p "$port" DEL leaderrun-bench-lock >/dev/null
exit $rc
