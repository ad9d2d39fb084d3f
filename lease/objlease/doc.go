// Package objlease keeps leaderrun's leases in an object store that keeps
// no timer (S3, Google Cloud Storage): the lease logic every such store
// shares, written against Bucket, a handful of conditional object
// operations. A store package (s3lease, gcslease) adds only its
// transport: a Bucket, its URL and its credentials.
//
// # Objects
//
// Under the store's prefix, lease NAME (or slot NAME~k) is the object
// lease/NAME; its fencing counter is token/NAME, its run history
// history/NAME, each standby standby/NAME@ID, and the probe's objects
// probe@ID. '@' is in no lease name and no slot name, and each kind has a
// top-level folder of its own, so no lease name can make another's object.
// Each object is a small JSON document. Every write to a lease object
// carries a fresh random value, so that its version (S3's ETag, an MD5 of
// the bytes) changes on every write, also when nothing else did.
//
// Every write to a lease or counter object is conditional: a create that
// fails if the object exists (If-None-Match: *; GCS: ifGenerationMatch=0),
// or a replace that fails unless the object still has the version last
// read (If-Match; GCS: ifGenerationMatch on its generation). A store
// that accepts those headers and ignores them would give two holders, so
// Probe checks, before a store is used, that the endpoint refuses both a
// second create and a replace on a wrong version (see probe.go).
//
// # Time: the store expires nothing
//
// As on Kubernetes (see kubelease's package doc, whose argument this is),
// the waiter plays the store's clock: each Store remembers, per lease, the
// version it last saw and when it first saw it on its boot clock
// (lease.BootClock), read after the answer arrived, and judges the lease
// free only when the object has kept that version for its TTL + ε. The
// holder's last confirmed write made that version after the holder read
// t_s, so no waiter takes over before t_s + L on its own clock, and the
// holder's deadline E = t_s + L·(1−ρ) − ε ends before that while the two
// clocks' rates differ by less than ρ. Taking over is a replace on the
// version judged: a renewal in between changed it, and the takeover fails;
// a takeover that succeeded changed it, and the old holder's next renewal
// fails and reads a record that is not its own (lease.ErrLost). A renewal
// never re-creates a deleted object. The record's wall-clock times are for
// people (status) and for holds (--hold-at-least, not a safety property);
// no takeover reads them.
//
// # Fencing tokens
//
// An acquisition first writes the lease object (a create, or a replace on
// the version it judged free), then raises the name's counter object with
// a conditional write, taking max(counter + 1, the store's clock in µs
// from the Date of the counter's read), and writes that token into the
// record, conditional on the version its acquiring write made; only then
// is the lease taken. Racers that lost the acquiring write never touch the
// counter. A token is used only if no acquisition came between its
// acquiring write and its token write, and a later acquisition succeeds
// only on a version written after that, so it reads and raises the
// counter later: tokens strictly increase per name, across slots (one
// counter per name), and survive the deletion of the lease object; a
// deleted counter restarts above the token the lease object held and at
// least at the store's clock, which is above every token minted before as
// long as that clock does not step back. The clock is a Date, in whole
// seconds: should the counter and the lease object both be deleted within
// the second of the last token, the next token can repeat it.
//
// # What is not guaranteed
//
// Beyond lease's argument for every store: the endpoint must be strongly
// consistent for a conditional write (S3 has been since 2020; a
// multi-region or eventually consistent gateway is not), and the probe
// sees only that it refuses the conditions, not that it does so under
// every race. Standbys are judged by the wall clock (the registry is never
// needed for safety).
package objlease
