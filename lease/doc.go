// Package lease is the heart of leaderrun: the contract every lease store
// implements (Store, Lease), the wait loop that takes a lease (Acquire), and
// the Keeper that renews it and decides, on its own clock, when leadership
// can no longer be vouched for. This comment is the safety argument of the
// whole tool; the README's "Safety model" section says the same for users.
//
// # What is guaranteed
//
// Notation: L is the TTL the store grants; t_s is our clock read just before
// an acquire or renew request is sent; ρ bounds how much faster our clock may
// run than the store's (1%); ε is the store's granularity (Redis a few ms,
// etcd 10ms, Azure 1s, Kubernetes 10ms); K bounds how long SIGKILL takes to
// empty a process group (250ms; more under a CPU limit, item 13); G is the
// grace between the stop signal and SIGKILL.
//
//  1. The store cannot expire a lease before t_s + L in real time: it starts
//     counting no earlier than it receives the request. So the lease is
//     certainly ours until E = t_s + L·(1−ρ) − ε. A successful renewal moves E
//     using its own t_s; a failed, timed-out or late answer leaves E alone
//     (Keeper.extend never moves E back). On a store that expires nothing
//     (Kubernetes: renewTime is a number the holder writes, read against
//     nobody's clock) the waiters play the store's part: each counts L + ε
//     on its own boot clock from when it first saw the version the holder's
//     last write made, which is after that write's t_s, and takes over only
//     with a write conditional on that version (see kubelease); ρ then
//     bounds the holder's clock rate against each waiter's.
//  2. E is read on CLOCK_BOOTTIME (BootClock), which keeps counting during
//     system suspend; Go's monotonic clock does not. Sleeps use an absolute
//     timerfd on the same clock, so a deadline that passed while the machine
//     slept fires the moment it wakes. Wall time and store timestamps are
//     never used for a decision.
//  3. An independent watchdog goroutine cancels the Keeper's context at
//     E − K − G, whether or not a renewal call is blocked, and closes KillC at
//     E − K, on the same boot clock. The runner sends the stop signal to the
//     child's process group on the first and SIGKILL on the second (or G after
//     the stop signal, if that comes first); the group is dead by E.
//  4. Every store call carries a deadline that ends at the stop point at the
//     latest (Keeper.callContext), and stores configure their clients to
//     honour it (go-redis ContextTimeoutEnabled, azcore TryTimeout, etcd:
//     one keep-alive per renewal, never the client's background one; pgx
//     interrupts the socket at the deadline, and statement_timeout bounds
//     the server's side; the MySQL driver closes the socket at the
//     deadline). Setting a connection up (Connector) is not a call: it
//     comes before the send time is read, and gets the time left to the
//     stop point, never more.
//  5. A transient renewal failure is retried quickly (50ms backoff, doubling);
//     an answer that the lease is gone or someone else's (ErrLost) cancels at
//     once without waiting for E.
//  6. Timing.Resolve refuses, before anything starts, values for which the
//     scheduled renewal plus one retry cannot fit before the stop point:
//     L(1−ρ) − ε − K − G ≥ renew-every + 2·call-timeout + FirstRetry. Defaults adapt to L
//     (renew-every L/3, call timeout renew-every/2, grace shrunk to fit); only
//     values the user gave are refused, with a message saying what would fit.
//  7. Keep starts a child only with runway: if E − now ≤ K + G + renew-every
//     after acquiring, it renews first and refuses if that does not help;
//     and the runner starts it only if the stop point has still not passed
//     right before the exec (runner.Config.MayStart), however long the way
//     there took.
//  8. The caller releases only after the runner confirmed the child's whole
//     tree gone (its cgroup empty, or its process group); the release is
//     conditional on our token. If the tree cannot be confirmed gone, the
//     lease is not released and runs out; on the file store the guard (see
//     item 11) keeps the lock until the tree is gone or 30 s after SIGKILL.
//  9. Every acquisition carries a fresh 128-bit random ID (NewID). Renew and
//     release succeed only while the store holds that ID; a vanished lease is
//     never re-created by a renewal. Acquire reuses one ID across the retries
//     of a call and counts validity from the first attempt whose answer was
//     lost, so a lost answer can neither lock us out nor stretch E.
//  10. Each acquisition gets a fencing token (Holder.Token) minted atomically
//     with it and strictly increasing per name: Redis
//     max(counter+1, server TIME in µs) in the acquire script, Azure
//     max(counter+1, response Date in µs) written under the lease (on both a
//     token never goes back even after the store loses its data, as long as
//     the store's clock does not step back; see redislease and bloblease),
//     etcd the key's create revision (the cluster's revision counter, which
//     goes back only if the cluster's data does; see etcdlease), the file
//     store max(counter in the locked file + 1, the clock in µs), handed
//     out only once the clock has passed it (see filelease), PostgreSQL
//     greatest(nextval(sequence), server clock in µs) under an advisory lock
//     on the name (see pglease), MySQL/MariaDB greatest(the name's counter
//     row + 1, server clock in µs), the counter row locked first in the
//     acquisition's transaction (see mysqllease), Kubernetes one more than the cluster's
//     etcd revision at the acquiring read (see kubelease: never back, also
//     when the Lease object is deleted and re-created).
//  11. Enforcement outlives leaderrun (runner.Guard). Items 3 and 8 need the
//     leaderrun process alive and scheduled, so before the child starts a
//     guard process is started in a process group of its own, deaf to forwarded
//     signals and without store access. The Keeper hands it every new E
//     (KeeperConfig.OnExtend), the runner the child's process group (or
//     cgroup). If leaderrun dies (its end of a socket closes while the
//     guard is still armed) the guard SIGKILLs the tree and waits until it is gone; on the
//     file store it holds a duplicate of the lock descriptor, so the kernel
//     lock outlives leaderrun until then. If leaderrun freezes, the guard
//     sends the stop signal at E − K − G and SIGKILL at E − K on its own boot
//     clock; a deadline that arrives after its stop signal never moves the
//     kill back. When leaderrun resumes after its stop point has passed,
//     Keeper.PastStopPoint is true and the run ends with ErrLost whatever
//     the child did. If the guard dies, leaderrun stops the child as on loss.
//  12. Containment (runner.Cgroup). Where a cgroup v2 subtree is writable the
//     child is started inside a cgroup of its own (CLONE_INTO_CGROUP, so the
//     guard knows it before the child exists); every descendant stays in it
//     whatever it does with sessions, SIGKILL is cgroup.kill, and the tree is
//     gone when the cgroup is empty. Elsewhere the process group is the unit.
//  13. CPU limits (Timing.Stall). A CFS bandwidth limit on a cgroup that
//     holds leaderrun (cgroup v2 cpu.max, v1 cpu.cfs_quota_us: a Kubernetes
//     CPU limit, systemd's CPUQuota=) holds every process under it,
//     leaderrun and its guard included, off the CPU once a period's quota is
//     spent, whatever their priority; with a CPU-bound child the way from a
//     deadline to the child's death (the timer's wake-up, the Go runtime's
//     hand-offs between threads, the SIGKILL, the child's exit) can take many
//     periods. So K is not fixed: at start leaderrun reads the limit of its
//     cgroup and of every ancestor (runner.CPULimitStall) and K becomes
//     250ms plus the periods the tightest limit needs to grant
//     runner.KillPathCPU (50ms) of CPU time: 1s at 5% of a core, 5s at 1%.
//     The stop and kill points come that much earlier, a default grace
//     shrinks, and values given that leave no room are refused by rule 6,
//     naming the limit. The 50ms is measured (the worst seen was about 23ms:
//     at 1% of a core, 23 periods), not derived.
//
// # Standbys and takeover order
//
// Every store is also a CandidateRegistry: a list of the instances waiting
// for a lease (label, priority, waiting since), each registration kept live
// by a heartbeat that expires (Redis, Azure) or by a lock its process holds
// (file). Acquire registers when it starts to wait and leaves when it
// returns, on a context of its own, so a waiter interrupted by a signal
// leaves nothing behind. When Wait says the lease may be free, Acquire lists
// the candidates (the same call reports whether the lease still looks held,
// so it replaces the attempt it would otherwise make) and takes its place in
// the line: higher priority first, then the longest waiting. The first in
// line tries at once, position p of the front (the first three) after p·δ
// (δ = CandidateTiming.Step: how long a better candidate may need to notice
// and try; AcquireOptions.PriorityStep replaces it for one candidate). A
// better candidate that is not scheduled for longer than δ loses its turn,
// and so can one whose previous turn, for a release less than 3·δ earlier,
// is still running in the others. A standby further back does not even list at once: it waits 3·δ
// and a random share of a spread (all such standbys together look about 20
// times a second, and the spread never exceeds the TTL), looks again, and
// tries only if the lease is still free. The best live candidate therefore
// wins without a round of messages; a release costs the store about three
// attempts and a bounded rate of listings, however many standbys wait; and a
// dead, frozen or slow front delays the next by at most 3·δ plus the spread,
// not forever: liveness comes first. A registration whose remaining time is
// beyond what any heartbeat asks for (written by hand or by another client)
// is ignored. A holder never consults the registry, so a running leader is
// never pre-empted.
//
// The registry is never needed for safety: exclusion, tokens and every
// deadline above rest on TryAcquire, Renew and Release alone. A candidate
// that ignores its rank, a stale or lost registration, a registry the store
// cannot reach or an ACL that forbids it can only change which waiter takes
// the lease next, never let two hold it. Registry failures are logged at
// debug level and Acquire then tries at once, as if priorities were equal.
//
// # Slots
//
// With Request.Slots = N above 1, the lease is a semaphore: Acquire takes
// the lowest free of N slots, and each slot is a lease of the store's own,
// under SlotName (slot 0 is the lease itself, so N = 1 is today's lease
// byte for byte). Nothing above is weakened, because nothing above is
// shared between slots: a slot is acquired, renewed, kept by a Keeper with
// its own deadline E, guarded, contained and released exactly as a lease
// is, so at most one holder runs per slot, hence at most N per lease, under
// the same assumptions. A crashed holder's slot frees after the TTL like a
// lease. The one shared state is the token counter: each store mints the
// tokens of all slots of a name from one counter (docs/stores.md, "Slots":
// a counter file or blob, the lease's Redis counter, PostgreSQL's sequence
// under the lease's advisory lock, the lease's MySQL counter row, etcd's revision, Kubernetes' revision of
// a write to a counter object), so tokens strictly increase per name across
// slots. Agreement on N is not a safety mechanism but a check: N travels in
// the holder's label, and a contender that finds a holder with another N is
// refused (ErrSlotsMismatch); contenders that disagree and never meet can
// exceed the smaller N. A waiter waits on every slot at once (one Wait per slot;
// the first that returns wins) and is one standby of the lease's line.
//
// # What is not guaranteed
//
// A lease is time-based, so exclusion holds only while the timing
// assumptions do. If the whole host is paused (SIGSTOP of leaderrun, its
// guard and its child together, a VM freeze) past E, the child resumes after
// another holder may have started; if the store loses the lease (a Redis failover with
// asynchronous replication, a PostgreSQL failover to an asynchronous standby,
// a store server whose clock jumps), a second
// holder can start while the first still runs. Nothing a client does can
// close these windows; a resource that rejects writes carrying a token lower
// than one it has seen can. Without such a resource, exclusion is best
// effort under process pauses and store failover.
//
// Under a CPU limit, K covers what was measured (item 13), not a proven
// bound: a limit changed after leaderrun started is not seen, and a host
// slower than the one measured may need more. A limit leaderrun's child can
// use up also slows renewals, which may then time out and end leadership
// early (safely).
//
// With the process group as the unit (no writable cgroup, or --contain
// group), a descendant that calls setsid leaves the group and escapes every
// signal, and in the instant between the child's exec and the runner telling
// the guard its group, a SIGKILL of leaderrun leaves only Pdeathsig to kill
// the child (not what it forked in that instant).
//
// The takeover order is best effort: a better candidate that joins in the
// instant the lease is freed may not be seen yet by the others, and δ is
// sized for a loaded host, not bounded; a lower-ranked candidate that finds
// the lease still free after its hold-back takes it.
//
// The file store (filelease) has no TTL: its lease ends when the holder's
// process does, and the kernel drops the lock at once, so none of the timing
// above applies to it; only replacement of the lock file makes it lost.
package lease
