#!/bin/sh
# pg-lock.sh URL COMMAND: the shell lock on PostgreSQL that scripts/bench.sh
# compares leaderrun with: one psql session takes a session advisory lock
# and runs COMMAND (psql's \!) while it holds it; the lock ends with the
# session (one psql start; no renewal, no fencing, no guard). COMMAND is
# one word.
url=$1
exec psql -X -qAt "$url" -c "SELECT pg_advisory_lock(hashtext('leaderrun-bench'))" -c "\\! $2" >/dev/null
