// Package kubelease keeps leaderrun's leases in Kubernetes, as
// coordination.k8s.io/v1 Lease objects of one namespace, through client-go.
// It is linked only into the leaderrun-kubernetes program.
//
// # URL and credentials
//
// kubernetes://NAMESPACE[?context=NAME][&kubeconfig=FILE]. Credentials are
// found as every Kubernetes tool finds them: the pod's service account
// first (when KUBERNETES_SERVICE_HOST is set and the token is mounted, and
// the URL names neither a context nor a kubeconfig), then the files in
// $KUBECONFIG, then ~/.kube/config, with the context the URL names or the
// current one. Without NAMESPACE, the pod's namespace or the context's is
// used (else "default"). Nothing of the credentials is ever printed. Open
// asks the API server once (a SelfSubjectRulesReview) whether the user may
// get, list, watch, create, update and delete Leases there, and refuses
// with one line naming the missing verbs (lease.ErrConfig) if not.
//
// # Data
//
// A lease named NAME is the Lease object ObjectName(NAME): NAME itself when
// it is a valid object name (and none leaderrun reserves), else a
// lower-case form with a hash; its other objects are OBJ.lr--KIND. Its spec is
// client-go's LeaseLock record, so `kubectl get lease` and existing tooling
// show the holder: holderIdentity (the holder label), leaseDurationSeconds
// (the TTL), acquireTime, renewTime and leaseTransitions. Annotations
// carry what LeaseLock has no field for: leaderrun/id (the acquisition ID),
// leaderrun/token (the fencing token), leaderrun/name and, during a hold,
// leaderrun/held-until. Every write is an update conditional on the
// resourceVersion last read or written (a compare-and-swap), or a create
// that fails if the object exists:
//
//   - acquire = a list of the object (which also returns the cluster's
//     current revision); absent: create it; released (holderIdentity empty),
//     hold over, or unchanged for its whole leaseDurationSeconds as this
//     process saw it (below): update it on the version read; else "held".
//     A record carrying our acquisition ID is our own earlier attempt whose
//     answer was lost: it is renewed and taken.
//   - renew = update renewTime on the version of our last write. A conflict
//     is read: a record that still names our holder, ID and token (an
//     answer of ours was lost, or someone annotated the object) is written
//     again on its version; anything else, or a deleted object, is
//     lease.ErrLost. A renewal never re-creates the object.
//   - release = update to holderIdentity "" and leaseDurationSeconds 1, as
//     client-go's LeaseLock releases, on the same conditions.
//
// # Time: the API server expires nothing
//
// Kubernetes keeps no timer on a Lease: renewTime is a number its holder
// writes, read against nobody's clock. So here the waiter plays the part the
// store's clock plays in lease's safety argument. Each Store remembers, per
// lease, the resourceVersion it last saw and when it first saw that version,
// on its boot clock (lease.BootClock), read after the answer arrived. It
// judges the lease free only when the record has stayed at that version for
// leaseDurationSeconds + ε since then; renewTime and acquireTime are never
// compared with any clock. In lease.Store's terms, with L the TTL and t_s
// the holder's clock just before it sent its last confirmed write (acquire
// or renew):
//
//  1. The write reached the API server after t_s, so a waiter first saw the
//     version it made no earlier than t_s in real time, and judges it
//     expired no earlier than t_s + L on its own clock. A waiter that saw it
//     later waits longer; one that never saw it waits a full L from its
//     first look. This is item 1 of lease's argument with the waiter's clock
//     as the store's: the holder's deadline E = t_s + L·(1−ρ) − ε, counted
//     by the Keeper from the send time of its last confirmed update as on
//     every store, ends before any waiter may take over, as long as the two
//     clocks' rates differ by less than ρ.
//  2. Taking over is an update conditional on the version the waiter judged:
//     if the holder renewed in the meantime the version changed and the
//     takeover fails with a conflict (answered "held"); if the takeover
//     succeeded, the old holder's next renewal, conditional on its own
//     version, fails with a conflict and reads a record that is no longer
//     its own: ErrLost.
//  3. Anything that changes the record (a renewal, a kubectl edit) restarts
//     every waiter's count, which only delays a takeover.
//
// A hold (ReleaseHeld) is different: it is not a safety property, and it
// ends when the wall clock passes leaderrun/held-until (or the record stays
// unchanged for the hold, whichever comes first), so that a waiter who
// first looks late does not wait a whole hold again.
//
// # Fencing tokens
//
// With etcd behind the API server (every conformant cluster), a
// resourceVersion is the etcd revision of the object's last write: one
// counter per cluster, raised by every write and never reused. An
// acquisition, whether it updates the object or creates it, takes as its
// token the cluster's revision at its list plus one (the list is a
// consistent read, so that revision is at least that of every earlier
// write, the deletion of an earlier object and the writes to the objects of
// the lease's other slots included). So the token is greater than every
// revision before the acquiring read and at most the revision of the
// acquiring write, which comes after it; a later acquisition of the same
// name always gets a greater token, also after the object was deleted and
// re-created (when leaseTransitions restarts at 0), and after the name was
// used with --slots (whose tokens are revisions too: see slots.go). It goes back only if the cluster's etcd data does (restored from an
// old snapshot without bumping its revision). An API server whose
// resourceVersions are not numbers (not etcd) is refused (lease.ErrConfig).
//
// # Standbys, watch, history
//
// Standbys are Lease objects of their own (see candidates.go), because
// every write to the lease's object restarts the waiters' counts; they are
// judged live by the wall clock, as the registry is never needed for
// safety. A waiter watches the lease's object from the version it read
// (the API's watch), so a release wakes it at once. Run history is one more
// Lease object per lease with one annotation per run (see history.go).
//
// # What is not guaranteed
//
// Beyond what lease's argument leaves out for every store: the API server
// answers a write only after etcd agreed it, so a partition that isolates
// the holder from the API server makes its renewals fail and it stops at
// E, while waiters on the other side count from their own last look. The
// safety of a takeover rests on the two hosts' clock rates, never on
// their wall clocks agreeing.
package kubelease
