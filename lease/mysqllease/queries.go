package mysqllease

import (
	"fmt"
	"strings"
)

// The SQL, written once for MariaDB (10.11, where it is tested) and MySQL 8
// (checked against its reference manual, see docs/stores.md): no
// RETURNING, no VALUES() or row alias in ON DUPLICATE KEY UPDATE (the
// values are bound again instead), no sequences, no SKIP LOCKED on a
// DELETE; the clock is UTC_TIMESTAMP(6), NOW(6) in UTC, which both
// servers read once per statement (its start) whatever the session's
// time zone; MariaDB-only settings sit in /*M! */ comments, which MySQL
// skips.

// Time on the server, in every statement: now, and now in microseconds
// since the epoch (the fencing tokens' clock).
const (
	sqlNow   = "UTC_TIMESTAMP(6)"
	sqlClock = "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))"
)

// queries holds the SQL for one lease table.
type queries struct {
	table, cands, runs        string // the tables' names, unquoted
	createTable, createCands  string
	createRuns                string
	acquire, status           string
	renew, release, hold      string
	join, leave               string
	candidates, candsOnly     string
	record, runsAll, runsSome string
}

// counterName is the row that keeps the token counter of lease name (and
// of all its slots): name and '~', a name no lease or slot has ('~'
// followed by nothing is no slot number, and no lease name holds '~').
func counterName(base string) string { return base + "~" }

func newQueries(table string) queries {
	q := queries{table: table, cands: table + "_standbys", runs: table + "_runs"}
	r := strings.NewReplacer("{T}", quote(q.table), "{C}", quote(q.cands), "{R}", quote(q.runs), "{NOW}", sqlNow, "{CLOCK}", sqlClock)
	// name and id compare byte by byte (ascii_bin): lease names and IDs
	// are ASCII and case-sensitive. holder is bytes: labels are whatever
	// the user gave.
	q.createTable = r.Replace(`CREATE TABLE IF NOT EXISTS {T} (
	name    VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
	holder  VARBINARY(2048) NOT NULL,
	id      VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	token   BIGINT NOT NULL,
	since   DATETIME(6) NOT NULL,
	ttl_ms  BIGINT NOT NULL,
	expires DATETIME(6) NOT NULL
) ENGINE=InnoDB`)
	// One round trip, one transaction, two upserts: first the counter row
	// of the lease's name (see counterName), which locks it until the
	// commit, so every acquisition of the name or of one of its slots
	// takes turns on it and commits its token in order; it becomes
	// greatest(counter + 1, the clock in µs), kept for the session by
	// LAST_INSERT_ID(expr). Then the lease row, which takes that value
	// (LAST_INSERT_ID()) as its token when it is free (expired) or ours
	// already (a retry whose answer was lost: token and since kept). (The
	// manual leaves mixing both forms of LAST_INSERT_ID in one statement
	// undefined: each statement here uses one.) The conditions read the
	// row as it was: assignments run left to right (or all at once, under
	// MariaDB's SIMULTANEOUS_ASSIGNMENT), and every condition reads only
	// columns assigned after it, or id, whose new value gives the same
	// answer (ours once we took the row). A SELECT after the commit says
	// whether the row is ours and, when not, who holds it.
	// :ctr counter row, :name, :holder, :id, :ttl in ms, :ttlus in µs.
	take := "(expires <= {NOW} OR id = :id)"
	q.acquire = r.Replace(strings.ReplaceAll(`START TRANSACTION;
INSERT INTO {T} (name, holder, id, token, since, ttl_ms, expires)
VALUES (:ctr, '', '', LAST_INSERT_ID(GREATEST(1, {CLOCK})), {NOW}, 0, '1970-01-01 00:00:00')
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token + 1, {CLOCK}));
INSERT INTO {T} (name, holder, id, token, since, ttl_ms, expires)
VALUES (:name, :holder, :id, LAST_INSERT_ID(), {NOW}, :ttl, {NOW} + INTERVAL :ttlus MICROSECOND)
ON DUPLICATE KEY UPDATE
	token = IF({TAKE}, IF(id = :id, token, LAST_INSERT_ID()), token),
	since = IF({TAKE} AND id <> :id, {NOW}, since),
	holder = IF({TAKE}, :holder, holder),
	ttl_ms = IF({TAKE}, :ttl, ttl_ms),
	id = IF({TAKE}, :id, id),
	expires = IF({TAKE}, {NOW} + INTERVAL :ttlus MICROSECOND, expires);
COMMIT;
SELECT id = :id, holder, token, since, ttl_ms, TIMESTAMPDIFF(MICROSECOND, {NOW}, expires), id = '', expires
FROM {T} WHERE name = :name AND expires > {NOW}`, "{TAKE}", take))
	// A row whose id is empty is a hold (hold): nobody's lease, kept until
	// it expires; the last column is then its end.
	q.status = r.Replace(`SELECT holder, token, since, ttl_ms, TIMESTAMPDIFF(MICROSECOND, {NOW}, expires), id = '', expires
FROM {T} WHERE name = :name AND expires > {NOW}`)
	q.renew = r.Replace(`UPDATE {T} SET expires = {NOW} + INTERVAL :ttlus MICROSECOND
WHERE name = :name AND id = :id AND expires > {NOW}`)
	q.release = r.Replace(`DELETE FROM {T} WHERE name = :name AND id = :id AND expires > {NOW}`)
	q.hold = r.Replace(`UPDATE {T} SET id = '', expires = {NOW} + INTERVAL :holdus MICROSECOND
WHERE name = :name AND id = :id AND expires > {NOW}`)
	q.standbys(r)
	q.history(r)
	return q
}

// standbys writes the statements of the standbys' table.
func (q *queries) standbys(r *strings.Replacer) {
	q.createCands = r.Replace(`CREATE TABLE IF NOT EXISTS {C} (
	name     VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	id       VARCHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
	holder   VARBINARY(2048) NOT NULL,
	priority INT NOT NULL,
	since    DATETIME(6) NOT NULL,
	expires  DATETIME(6) NOT NULL,
	PRIMARY KEY (name, id)
) ENGINE=InnoDB`)
	// The name's lapsed rows (their standbys died) go first, then the
	// upsert, then the count of the live ones, this one included: three
	// statements in one round trip.
	q.join = r.Replace(`DELETE FROM {C} WHERE name = :name AND expires <= {NOW} AND id <> :id;
INSERT INTO {C} (name, id, holder, priority, since, expires)
VALUES (:name, :id, :holder, :prio, :since, {NOW} + INTERVAL :expus MICROSECOND)
ON DUPLICATE KEY UPDATE holder = :holder, priority = :prio, expires = {NOW} + INTERVAL :expus MICROSECOND;
SELECT COUNT(*) FROM {C} WHERE name = :name AND expires > {NOW}`)
	q.leave = r.Replace(`DELETE FROM {C} WHERE name = :name AND id = :id`)
	// The live standbys (kind 0: ID, holder, priority, since, remaining
	// µs) and the holder (kind 1: '', holder, token, since, remaining µs,
	// ttl ms, the end of a hold) in one statement.
	q.candsOnly = r.Replace(`SELECT 0, id, holder, CAST(priority AS SIGNED), since, TIMESTAMPDIFF(MICROSECOND, {NOW}, expires), CAST(0 AS SIGNED), CAST(NULL AS DATETIME(6))
FROM {C} WHERE name = :name AND expires > {NOW}`)
	q.candidates = q.candsOnly + r.Replace(`
UNION ALL
SELECT 1, '', holder, token, since, TIMESTAMPDIFF(MICROSECOND, {NOW}, expires), ttl_ms, IF(id = '', expires, NULL)
FROM {T} WHERE name = :name AND expires > {NOW}`)
}

// history writes the statements of the run history's table.
func (q *queries) history(r *strings.Replacer) {
	q.createRuns = r.Replace("CREATE TABLE IF NOT EXISTS {R} (\n" +
		"\tname      VARCHAR(255) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,\n" +
		"\ttoken     BIGINT NOT NULL,\n" +
		"\tholder    VARBINARY(2048) NOT NULL,\n" +
		"\tstarted   DATETIME(6) NOT NULL,\n" +
		"\tended     DATETIME(6) NULL,\n" +
		"\toutcome   VARBINARY(1024) NOT NULL DEFAULT '',\n" +
		"\texit_code INT NOT NULL DEFAULT 0,\n" +
		"\t`signal`  VARBINARY(1024) NOT NULL DEFAULT '',\n" +
		"\tversion   VARBINARY(1024) NOT NULL DEFAULT '',\n" +
		"\tPRIMARY KEY (name, token)\n" +
		") ENGINE=InnoDB")
	// Three statements in one round trip. cut is the lowest token kept,
	// counting this run, among the valid rows (token and start not beyond
	// the server's clock plus the skew tolerated: tokens are at least the
	// clock in µs when minted, so one beyond it is no run); the run is
	// written only when it is not below cut; then the rows below cut and
	// the invalid ones go. (SIGNAL is a reserved word in MySQL.)
	valid := "token <= {CLOCK} + :skewus AND started <= {NOW} + INTERVAL :skewus MICROSECOND"
	q.record = r.Replace(strings.ReplaceAll("SELECT COALESCE((SELECT t FROM (\n"+
		"\tSELECT token AS t FROM {R} WHERE name = :name AND token <> :token AND {VALID}\n"+
		"\tUNION ALL SELECT :token FROM DUAL WHERE :token <= {CLOCK} + :skewus AND :started <= {NOW} + INTERVAL :skewus MICROSECOND\n"+
		") k ORDER BY t DESC LIMIT 1 OFFSET :off), 0) INTO @leaderrun_cut;\n"+
		"INSERT INTO {R} (name, token, holder, started, ended, outcome, exit_code, `signal`, version)\n"+
		"SELECT :name, :token, :holder, :started, IF(:ended, {NOW}, NULL), :outcome, :code, :sig, :version FROM DUAL WHERE :token >= @leaderrun_cut\n"+
		"ON DUPLICATE KEY UPDATE holder = :holder, started = :started, ended = IF(:ended, {NOW}, NULL), outcome = :outcome,\n"+
		"\texit_code = :code, `signal` = :sig, version = :version;\n"+
		"DELETE FROM {R} WHERE name = :name AND (token < @leaderrun_cut OR NOT ({VALID}))", "{VALID}", valid))
	runs := "SELECT token, holder, started, ended, outcome, exit_code, `signal`, version FROM {R}\n" +
		"WHERE name = :name AND token <= :tokmax AND started <= :atmax ORDER BY token DESC"
	q.runsAll = r.Replace(runs)
	q.runsSome = r.Replace(runs + " LIMIT :lim")
}

// quote quotes an identifier (the table names are checked: letters,
// digits and '_').
func quote(id string) string { return "`" + id + "`" }

// bind turns :name placeholders into ? and returns the arguments in their
// order. A name missing from args is a bug: bind panics.
func bind(sql string, args map[string]any) (string, []any) {
	var (
		b   strings.Builder
		out []any
	)
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		if c != ':' || i+1 >= len(sql) || !identStart(sql[i+1]) {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(sql) && identPart(sql[j]) {
			j++
		}
		v, ok := args[sql[i+1:j]]
		if !ok {
			panic(fmt.Sprintf("mysqllease: no value for :%s", sql[i+1:j]))
		}
		b.WriteByte('?')
		out = append(out, v)
		i = j - 1
	}
	return b.String(), out
}

func identStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' }
func identPart(c byte) bool  { return identStart(c) || c >= '0' && c <= '9' }
