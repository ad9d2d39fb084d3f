#!/usr/bin/env bash
# scripts/bench.sh measures what the issues set targets for, on this machine,
# in one run so the ratios are fair:
#   1. start-up cost side by side (scripts/startcost, round-robin medians):
#      true, flock, the floor of a Go wrapper, the floor of leaderrun's
#      design (also built with leaderrun's libraries) and a Go hello-world
#      (built here), leaderrun -- true on the
#      file store (also --contain group and --history-keep 0), on Redis,
#      etcd and PostgreSQL against their peer tools' locks, --version and
#      --help; the ratios as a Markdown table;
#   2. clean handover latency on the file store (Go benchmark, p50/p90),
#      and on Redis and etcd beside `etcdctl lock`'s (medians, ratios);
#   3. peak RSS of leaderrun while it supervises `sleep 5` on file and Redis
#      (/usr/bin/time),
#      and the guard process's private memory (smaps_rollup);
#   4. what each containment mode costs `leaderrun -- true` (group, cgroup);
#   5-7. each network store (scripts/bench-*.sh) and standby fleets of 10,
#      100 and 1,000 on every store (e2e BenchmarkStandbyHerd);
#   8. the clean handover with and without run history;
#   9. the safety margin under overload (scripts/bench-overload.sh).
# Results go to stdout and bench-out/. Nothing leaves 127.0.0.1.
# LEADERRUN_BENCH_RUNS sets the rounds of 1; LEADERRUN_BENCH_ONLY=startup
# runs 1 alone.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"
need() { command -v "$1" >/dev/null || { apt-get install -y "$2" >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y "$2" >/dev/null; }; }; }
need hyperfine hyperfine
[ -x /usr/bin/time ] || need /usr/bin/time time
out=bench-out
mkdir -p "$out"
bin=$out/leaderrun
# leaderrun and its store programs, as scripts/release.sh builds them: static
# (without cgo, a store program links no C library: its dynamic loader alone
# cost 1 ms a run here) and without urfave/cli's documentation renderers
CGO_ENABLED=0 go build -trimpath -tags urfave_cli_no_docs -o "$out/" . ./cmd/...
store=$(mktemp -d /tmp/leaderrun-bench.XXXXXX)
redis_dir=$store/redis-server
mkdir -p "$redis_dir"
trap 'scripts/redis.sh stop "$redis_dir" >/dev/null 2>&1 || true; rm -rf "$store"' EXIT
scripts/redis.sh start "$redis_dir" single >/dev/null
redis_addr=$(sed -n 's/^LEADERRUN_TEST_REDIS=//p' "$redis_dir/env")
runs=${LEADERRUN_BENCH_RUNS:-300}

echo "== 1. start-up cost side by side: medians of $runs rounds, every command once per round"
# The references are built in this run: a Go hello-world, and the floor of a
# Go wrapper (flock + run in a process group with Pdeathsig); each network
# store is compared with the peer tool a script would use instead (the shell
# locks are scripts/startcost/peers). etcd and PostgreSQL join when their
# servers can be started here. The table goes to $out/startup.md
# (docs/performance.md, "Start-up cost").
go build -o "$out/hello" ./scripts/startcost/hello
go build -o "$out/floor" ./scripts/startcost/floor
go build -o "$out/designfloor" ./scripts/startcost/designfloor
# the design floor built as leaderrun is (its libraries, the signals it
# catches): static, without urfave/cli's documentation renderers
CGO_ENABLED=0 go build -trimpath -tags urfave_cli_no_docs -o "$out/libfloor" ./scripts/startcost/libfloor
go build -o "$out/startcost" ./scripts/startcost
# Every program measured is copied once, so that each runs as an installed
# one does. The Go linker writes its output through a memory map, which
# leaves the file in the page cache as single pages; a program copied, or
# read from disk after a reboot, is cached in large folios, which exec maps
# many pages at a time: the same leaderrun --version took 0.87x the time
# copied as linked (200 rounds, ext4, Linux 6.18), and the smaller
# references gain less, so linked programs would overstate every ratio.
settle() { for f; do cp "$f" "$f.copy" && mv "$f.copy" "$f"; done; }
settle "$out"/leaderrun "$out"/leaderrun-* "$out/hello" "$out/floor" "$out/designfloor" "$out/libfloor"
peers=scripts/startcost/peers
export ETCDCTL_API=3
variants=(
	true=true
	flock="flock $store/flock.lock true"
	go-floor="$out/floor $store/floor.lock true"
	go-hello="$out/hello"
	lib-version="$out/libfloor --version"
	version="$bin --version"
	help="$bin --help"
	file="$bin -q --store file://$store -- true"
	file-group="$bin -q --contain group --store file://$store --name group -- true"
	file-nohistory="$bin -q --history-keep 0 --store file://$store --name nohist -- true"
	redis="$bin -q --store redis://$redis_addr -- true"
	redis-direct="$out/leaderrun-redis -q --store redis://$redis_addr --name direct -- true"
	redis-cli-lock="$peers/redis-lock.sh $redis_addr true"
)
ratios=("flock / go-floor" "file / go-floor" "file-group / go-floor" "file-nohistory / go-floor"
	"version / go-hello" "lib-version / go-hello" "version / lib-version" "help / go-hello" "redis / redis-cli-lock" "redis-direct / redis-cli-lock")
# The floor of leaderrun's own design on the file store (lock and holder
# record, a guard process from its own image, a cgroup for the child, the
# history's two lines; scripts/startcost/designfloor): what is left between
# it and leaderrun is leaderrun's code, not what its promises need. It needs
# a writable cgroup v2 hierarchy, as leaderrun's cgroup does. The same
# floor built with what leaderrun must be built with (urfave/cli,
# fatih/color, log/slog, and the nine signals caught that a run forwards or
# must survive; scripts/startcost/libfloor) is the least any program with
# leaderrun's libraries and promises can cost; `libfloor --version` is the
# least such a program pays to print its version.
if "$out/designfloor" "$store/design.lock" true; then
	variants+=(design-floor="$out/designfloor $store/design.lock true" lib-floor="$out/libfloor $store/lib.lock true")
	ratios+=("design-floor / go-floor" "lib-floor / go-floor" "file / design-floor" "file / lib-floor")
else
	echo "   (the design floor exited $? here, 125 without a writable cgroup v2: its rows are left out)"
fi
etcd_dir=$store/etcd-server pg_dir=$store/pg-server my_dir=$store/mariadb-server s3_dir=$store/s3-server
mkdir -p "$etcd_dir" "$pg_dir" "$my_dir" "$s3_dir"
trap 'scripts/redis.sh stop "$redis_dir" >/dev/null 2>&1 || true; scripts/etcd.sh stop "$etcd_dir" >/dev/null 2>&1 || true; scripts/postgres.sh stop "$pg_dir" >/dev/null 2>&1 || true; scripts/mariadb.sh stop "$my_dir" >/dev/null 2>&1 || true; scripts/versitygw.sh stop "$s3_dir" >/dev/null 2>&1 || true; rm -rf "$store"' EXIT
if command -v etcdctl >/dev/null && scripts/etcd.sh start "$etcd_dir" single >/dev/null 2>&1; then
	etcd_url=$(sed -n 's/^LEADERRUN_TEST_ETCD_URL=//p' "$etcd_dir/env")
	variants+=(etcd="$bin -q --store $etcd_url -- true" etcdctl-lock="etcdctl --endpoints=${etcd_url#etcd://} lock leaderrun-bench true")
	ratios+=("etcd / etcdctl-lock")
else
	echo "   (no etcd here: its row is left out)"
fi
if command -v psql >/dev/null && scripts/postgres.sh start "$pg_dir" >/dev/null 2>&1; then
	pg_url=$(sed -n 's/^LEADERRUN_TEST_POSTGRES_URL=//p' "$pg_dir/env")
	variants+=(postgres="$bin -q --store $pg_url -- true" psql-lock="$peers/pg-lock.sh $pg_url true")
	ratios+=("postgres / psql-lock")
else
	echo "   (no PostgreSQL here: its row is left out)"
fi
if command -v mariadbd >/dev/null && scripts/mariadb.sh start "$my_dir" >/dev/null 2>&1; then
	my_url=$(sed -n 's/^LEADERRUN_TEST_MYSQL_URL=//p' "$my_dir/env")
	variants+=(mysql="$bin -q --store $my_url -- true" mysql-lock="$peers/my-lock.sh $my_url true")
	ratios+=("mysql / mysql-lock")
else
	echo "   (no MariaDB here: its row is left out)"
fi
# LEADERRUN_BENCH_BEFORE=DIR (a directory with an older build's leaderrun
# and leaderrun-* programs) adds each leaderrun command of that build, as
# NAME-before, in the same rounds: the table's "before" rows.
if [ -n "${LEADERRUN_BENCH_BEFORE:-}" ]; then
	cp -r "$LEADERRUN_BENCH_BEFORE/." "$store/before" # copied: settled as above
	LEADERRUN_BENCH_BEFORE=$store/before
	for v in "${variants[@]}"; do
		name=${v%%=*} cmdline=${v#*=}
		case $cmdline in "$bin "* | "$out/leaderrun-"*) ;; *) continue ;; esac
		cmdline=${cmdline//"$out/"/"$LEADERRUN_BENCH_BEFORE/"}
		variants+=("$name-before=${cmdline/ --name / --name before-}")
		for r in "${ratios[@]}"; do
			[ "${r%% /*}" != "$name" ] || ratios+=("$name-before /${r#* /}")
		done
	done
fi
"$out/startcost" -n "$runs" -markdown "$out/startup.md" "${variants[@]}" \
	-- "file - go-floor" "redis - go-floor" "version - go-hello" "help - go-hello" "${ratios[@]}" \
	| tee "$out/startup.txt"
echo "   conditions: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg) after the run; Markdown table in $out/startup.md"
echo "   targets: file <= 1.5x go-floor (wall and CPU); redis, etcd, postgres, mysql <= 1.0x their peer; --version <= 1.1x go-hello"
echo "   (lib-floor / go-floor and lib-version / go-hello: what the fixed libraries and promises cost before any code of leaderrun's; docs/performance.md)"
# LEADERRUN_BENCH_ONLY=startup stops here (the start-up table alone).
[ "${LEADERRUN_BENCH_ONLY:-}" != startup ] || exit 0

echo "== 2. clean handover (file store; Redis and etcd beside etcdctl lock)"
go test -run '^$' -bench 'BenchmarkFileHandover' -benchtime 30x ./e2e | tee "$out/handover.txt" | grep -E 'Benchmark' | sed 's/^/   /'
# The same handover on Redis and on etcd, and etcdctl lock's on the same
# etcd, one of each per round (target: Redis <= 1.0x etcdctl lock).
if [ -n "${etcd_url:-}" ]; then
	LEADERRUN_TEST_REDIS=$redis_addr LEADERRUN_TEST_ETCD_URL=$etcd_url \
		go test -run '^$' -bench 'BenchmarkHandoverPeers' -benchtime 30x ./e2e | tee -a "$out/handover.txt" | grep -E 'Benchmark' | sed 's/^/   /'
fi

echo "== 3. peak RSS supervising sleep 5 (target <= 8 MiB on every store)"
for st in "file://$store" "redis://$redis_addr"; do
	/usr/bin/time -f '%M' -o "$out/rss.txt" "$bin" -q --store "$st" --name rss -- sleep 5
	awk -v s="${st%%://*}" '{printf "   %-6s max RSS %.1f MiB\n", s, $1/1024}' "$out/rss.txt"
done
"$bin" -v --store "file://$store" --name guardmem -- sleep 2 2>"$out/guard.log" &
lrpid=$!
for _ in $(seq 1 200); do grep -q 'child started' "$out/guard.log" && break; sleep 0.01; done
gpid=$(grep -o 'guard_pid=[0-9]*' "$out/guard.log" | cut -d= -f2)
awk '/^Private_Dirty/ {printf "   guard private memory (Private_Dirty) %.2f MiB (target <= 2 MiB)\n", $2/1024}' "/proc/$gpid/smaps_rollup"
awk '/^Private_Dirty/ {printf "   leaderrun private memory (Private_Dirty) %.2f MiB\n", $2/1024}' "/proc/$lrpid/smaps_rollup"
wait "$lrpid"

echo "== 3b. containment cost on \`leaderrun -- true\` (the guard is started in both)"
hyperfine -N --warmup 20 --runs 200 --export-json "$out/contain.json" \
	"$bin -q --contain group --store file://$store -- true" \
	"$bin -q --contain auto --store file://$store -- true" >/dev/null
python3 - "$out/contain.json" <<'PY'
import json, sys
for x in json.load(open(sys.argv[1]))["results"]:
    mode = x["command"].split("--contain ")[1].split()[0]
    print(f"   --contain {mode:5s} median {x['median']*1000:.3f} ms  user+sys {(x['user']+x['system'])*1000:.2f} ms")
PY

# Redis store (its own server, stopped by PID): scripts/bench-redis.sh. A
# failure there is reported but does not fail the file-store numbers above.
if [ -x scripts/bench-redis.sh ]; then
	echo "== 4. Redis store (scripts/bench-redis.sh)"
	scripts/bench-redis.sh || echo "   scripts/bench-redis.sh failed (exit $?)"
fi

# Azure store (its own Azurite, stopped by PID): scripts/bench-azure.sh.
if [ -x scripts/bench-azure.sh ]; then echo "== 5. Azure store (scripts/bench-azure.sh)"; scripts/bench-azure.sh || echo "   scripts/bench-azure.sh failed; the results above stand" >&2; fi

# PostgreSQL store (its own server, stopped by PID): scripts/bench-postgres.sh.
if [ -x scripts/bench-postgres.sh ]; then echo "== 6. PostgreSQL store (scripts/bench-postgres.sh)"; scripts/bench-postgres.sh || echo "   scripts/bench-postgres.sh failed; the results above stand" >&2; fi

# MySQL/MariaDB and S3 (versitygw): clean handover (20 runs) and failover
# after a SIGKILLed leader (10 runs, a TTL each), each on a server of its
# own, stopped by PID (e2e BenchmarkMySQL*, BenchmarkS3*).
echo "== 6b. MySQL/MariaDB and S3 stores: handover and failover"
bench_on_server() { # SCRIPT DIR BENCHMARK-PREFIX (a server section 1 started is used as it is)
	if [ -s "$2/env" ] || scripts/$1 start "$2" >/dev/null 2>&1; then
		(set -a && . "$2/env" && set +a &&
			go test -run '^$' -bench "^$3Handover\$" -benchtime 20x ./e2e &&
			go test -run '^$' -bench "^$3Failover\$" -benchtime 10x ./e2e) | grep -E '^Benchmark' | sed 's/^/   /'
	else
		echo "   scripts/$1 could not start a server: its rows are left out" >&2
	fi
}
bench_on_server mariadb.sh "$my_dir" BenchmarkMySQL
bench_on_server versitygw.sh "$s3_dir" BenchmarkS3

# Standby fleets (issue 17): per store and fleet size, what waiting costs the
# store, the burst after a release and the time to the next child, and the
# memory of one standby (e2e BenchmarkStandbyHerd: servers of its own,
# stopped by PID). LEADERRUN_BENCH_STANDBYS (default 10,100,1000) and
# LEADERRUN_BENCH_STORES choose; Azure stops at 200 standbys.
echo "== 7. standby fleets (BenchmarkStandbyHerd)"
LEADERRUN_BENCH_STANDBYS=${LEADERRUN_BENCH_STANDBYS:-10,100,1000} \
	go test -run '^$' -bench 'BenchmarkStandbyHerd' -benchtime 1x -timeout 3h ./e2e |
	tee "$out/herd.txt" | grep -E 'N=[0-9]+: waiting' | sed 's/^ *bench_herd_test.go:[0-9]*: /   /' ||
	echo "   BenchmarkStandbyHerd failed; see $out/herd.txt" >&2

# Run history (issue 20): the end of each run is written after the release,
# one store round trip; the handover must not grow. Same benchmarks with the
# history off (LEADERRUN_HISTORY_KEEP=0, read by every leaderrun they start).
echo "== 8. clean handover with and without run history (file, Redis)"
for keep in 100 0; do
	LEADERRUN_HISTORY_KEEP=$keep LEADERRUN_TEST_REDIS=$redis_addr \
		go test -run '^$' -bench 'BenchmarkFileHandover|BenchmarkRedisHandover' -benchtime 30x ./e2e |
		grep -E '^Benchmark' | sed "s/^/   history-keep $keep: /"
done

# The safety margin under overload: child's death (kernel) to the
# lease's expiry (Redis), idle, beside stress-ng and under a 5 % CPU limit.
# It takes a while (about 5 s a trial): LEADERRUN_BENCH_OVERLOAD_TRIALS
# (default 100; 0 skips it).
if [ "${LEADERRUN_BENCH_OVERLOAD_TRIALS:-100}" != 0 ]; then
	echo "== 9. safety margin under overload (scripts/bench-overload.sh)"
	scripts/bench-overload.sh "${LEADERRUN_BENCH_OVERLOAD_TRIALS:-100}" || echo "   scripts/bench-overload.sh failed; the results above stand" >&2
fi
