#!/bin/sh
# my-lock.sh URL COMMAND: the shell lock on MySQL/MariaDB that
# scripts/bench.sh compares leaderrun with: one client session takes a named
# lock (GET_LOCK) and runs COMMAND (the client's system command) while it
# holds it; the lock ends with the session (one client start; no renewal,
# no fencing, no guard). URL is mysql://USER:PASSWORD@HOST:PORT/DATABASE;
# COMMAND is one word.
rest=${1#*://}
userinfo=${rest%%@*} hostpart=${rest#*@}
user=${userinfo%%:*} pass=${userinfo#*:}
hostport=${hostpart%%/*} db=${hostpart#*/}
db=${db%%\?*}
client=mariadb
command -v mariadb >/dev/null || client=mysql
# The client's own commands (system) are read at the start of a line.
printf "SELECT GET_LOCK('leaderrun-bench', -1);\nsystem %s\n" "$2" |
	MYSQL_PWD=$pass "$client" --no-defaults -h "${hostport%:*}" -P "${hostport##*:}" -u "$user" -D "$db" -N -B >/dev/null
