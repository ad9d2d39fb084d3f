package pglease

import (
	"strings"

	"github.com/jackc/pgx/v5"
)

// queries holds the SQL for one lease table. Parameter types come from the
// casts, so each statement is one round trip without a prepare.
type queries struct {
	table, seqName, channel string
	prefix                  string // lock key prefix: the table as given and '/'
	createSeq, createTable  string
	acquire, status         string
	renew, release          string
	releaseHeld             string

	cands                              string // the standbys' table, sanitized
	createCands                        string
	join, leave, candidates, candsOnly string
}

// newQueries writes every statement of the store for table (tableS is its
// sanitized name). It is long because it is the SQL text, one statement
// after another, each beside the next so that they can be read together.
func newQueries(table pgx.Identifier, tableS string) queries {
	t := table.Sanitize()
	seqID := append(pgx.Identifier{}, table...)
	seqID[len(seqID)-1] += "_token"
	seq := seqID.Sanitize()
	r := strings.NewReplacer("{{SEQ}}", quoteLiteral(seq), "{{T}}", t)
	q := queries{
		table:   t,
		seqName: strings.Join(seqID, "."),
		channel: tableS,
		prefix:  tableS + "/",
	}
	q.createSeq = "CREATE SEQUENCE IF NOT EXISTS " + seq + " AS bigint"
	q.createTable = r.Replace(`CREATE TABLE IF NOT EXISTS {{T}} (
	name    text PRIMARY KEY,
	holder  text NOT NULL,
	id      text NOT NULL,
	token   bigint NOT NULL,
	since   timestamptz NOT NULL,
	ttl_ms  bigint NOT NULL,
	expires timestamptz NOT NULL
)`)
	// $1 name, $2 holder, $3 acquisition ID, $4 TTL in ms, $5 lock key.
	// The advisory lock is taken (MATERIALIZED: before anything else) so the
	// token is minted only after every earlier acquisition of the name has
	// committed. The first branch of the UNION is our acquisition; the
	// second, when there is none, the holder as this statement's snapshot
	// saw it.
	q.acquire = r.Replace(`WITH lk AS MATERIALIZED (
	SELECT pg_advisory_xact_lock(hashtextextended($5::text, 0)) AS x
), ins AS (
	INSERT INTO {{T}} AS l (name, holder, id, token, since, ttl_ms, expires)
	SELECT $1::text, $2::text, $3::text,
		greatest(nextval({{SEQ}}::regclass), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint),
		clock_timestamp(), $4::bigint, clock_timestamp() + $4::bigint * interval '1 millisecond'
	FROM lk
	ON CONFLICT (name) DO UPDATE SET
		holder = EXCLUDED.holder,
		id = EXCLUDED.id,
		ttl_ms = EXCLUDED.ttl_ms,
		expires = EXCLUDED.expires,
		token = CASE WHEN l.id = EXCLUDED.id THEN l.token ELSE EXCLUDED.token END,
		since = CASE WHEN l.id = EXCLUDED.id THEN l.since ELSE EXCLUDED.since END
	WHERE l.expires <= clock_timestamp() OR l.id = EXCLUDED.id
	RETURNING l.token, l.since
)
SELECT true, '', token, since, 0::bigint, 0::bigint, NULL::timestamptz FROM ins
UNION ALL
SELECT false, holder, token, since, ttl_ms,
	greatest(0, ceil(extract(epoch FROM expires - clock_timestamp()) * 1000))::bigint, CASE WHEN id = '' THEN expires END
FROM {{T}} WHERE name = $1::text AND NOT EXISTS (SELECT 1 FROM ins)`)
	// A row whose id is empty is a hold (releaseHeld): nobody's lease, kept
	// until it expires; the last column is then its end, else NULL.
	q.status = r.Replace(`SELECT holder, token, since, ttl_ms,
	greatest(0, ceil(extract(epoch FROM expires - clock_timestamp()) * 1000))::bigint, CASE WHEN id = '' THEN expires END
FROM {{T}} WHERE name = $1::text AND expires > clock_timestamp()`)
	// $1 name, $2 ID, $3 TTL in ms.
	q.renew = r.Replace(`UPDATE {{T}} SET expires = clock_timestamp() + $3::bigint * interval '1 millisecond'
WHERE name = $1::text AND id = $2::text AND expires > clock_timestamp()`)
	// $1 name, $2 ID, $3 channel. Returns a row only when ours was deleted;
	// live says it had not expired yet.
	q.release = r.Replace(`WITH d AS (
	DELETE FROM {{T}} WHERE name = $1::text AND id = $2::text
	RETURNING expires > clock_timestamp() AS live
)
SELECT d.live, pg_notify($3::text, $1::text) IS NULL FROM d`)
	// $1 name, $2 ID, $3 hold in ms. The row stays, without an ID (so
	// nobody can renew or release it), until the hold's end on the
	// server's clock; the acquisition's WHERE lets a new holder in then.
	q.releaseHeld = r.Replace(`UPDATE {{T}} SET id = '', expires = clock_timestamp() + $3::bigint * interval '1 millisecond'
WHERE name = $1::text AND id = $2::text AND expires > clock_timestamp()`)

	// The standbys: one row per waiting instance, live while expires (on
	// the server's clock) is ahead.
	candID := append(pgx.Identifier{}, table...)
	candID[len(candID)-1] += "_standbys"
	rc := strings.NewReplacer("{{C}}", candID.Sanitize(), "{{T}}", t)
	q.cands = candID.Sanitize()
	q.createCands = rc.Replace(`CREATE TABLE IF NOT EXISTS {{C}} (
	name     text NOT NULL,
	id       text NOT NULL,
	holder   text NOT NULL,
	priority integer NOT NULL,
	since    timestamptz NOT NULL,
	expires  timestamptz NOT NULL,
	PRIMARY KEY (name, id)
)`)
	// $1 name, $2 ID, $3 holder, $4 priority, $5 since, $6 expiry in ms.
	// Returns the live standbys, this one included (the count runs on the
	// statement's snapshot, before the upsert). The name's lapsed rows
	// (their standbys died) go in the same statement, those no other
	// transaction is touching: it never waits for a lock.
	q.join = rc.Replace(`WITH gone AS (
	DELETE FROM {{C}} WHERE ctid IN (
		SELECT ctid FROM {{C}} WHERE name = $1::text AND expires <= clock_timestamp() FOR UPDATE SKIP LOCKED)
), up AS (
	INSERT INTO {{C}} (name, id, holder, priority, since, expires)
	VALUES ($1::text, $2::text, $3::text, $4::integer, $5::timestamptz, clock_timestamp() + $6::bigint * interval '1 millisecond')
	ON CONFLICT (name, id) DO UPDATE SET holder = EXCLUDED.holder, priority = EXCLUDED.priority, expires = EXCLUDED.expires
	RETURNING 1
)
SELECT count(*) + 1 FROM {{C}} WHERE name = $1::text AND id <> $2::text AND expires > clock_timestamp()`)
	// $1 name, $2 ID.
	q.leave = rc.Replace(`DELETE FROM {{C}} WHERE name = $1::text AND id = $2::text`)
	// $1 name: the live standbys (kind false: ID, holder, priority, since,
	// remaining ms) and the holder (kind true: '', holder, token, since,
	// remaining ms, ttl ms, the end of a hold) in one statement.
	q.candsOnly = rc.Replace(`SELECT false, id, holder, priority::bigint, since,
	greatest(0, ceil(extract(epoch FROM expires - clock_timestamp()) * 1000))::bigint, 0::bigint, NULL::timestamptz
FROM {{C}} WHERE name = $1::text AND expires > clock_timestamp()`)
	q.candidates = q.candsOnly + rc.Replace(`
UNION ALL
SELECT true, '', holder, token, since,
	greatest(0, ceil(extract(epoch FROM expires - clock_timestamp()) * 1000))::bigint, ttl_ms, CASE WHEN id = '' THEN expires END
FROM {{T}} WHERE name = $1::text AND expires > clock_timestamp()`)
	return q
}

// lockKey is the advisory lock's text for a lease name: the table and the
// name, so two tables do not serialise each other's names (a hash collision
// only makes two acquisitions take turns).
func (q queries) lockKey(name string) string { return q.prefix + tokenDomain(name) }

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
