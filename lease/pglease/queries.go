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
}

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
SELECT true, '', token, since, 0::bigint, 0::bigint FROM ins
UNION ALL
SELECT false, holder, token, since, ttl_ms,
	greatest(0, ceil(extract(epoch FROM expires - clock_timestamp()) * 1000))::bigint
FROM {{T}} WHERE name = $1::text AND NOT EXISTS (SELECT 1 FROM ins)`)
	q.status = r.Replace(`SELECT holder, token, since, ttl_ms,
	greatest(0, ceil(extract(epoch FROM expires - clock_timestamp()) * 1000))::bigint
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
	return q
}

// lockKey is the advisory lock's text for a lease name: the table and the
// name, so two tables do not serialise each other's names (a hash collision
// only makes two acquisitions take turns).
func (q queries) lockKey(name string) string { return q.prefix + name }

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
