package kubelease

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	coordv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The annotations and labels leaderrun writes on its Lease objects. The
// spec itself is client-go's LeaseLock record, so kubectl and existing
// tooling show the holder.
const (
	annID        = "leaderrun/id"         // the acquisition ID (lease.Request.ID)
	annToken     = "leaderrun/token"      // the fencing token, decimal
	annName      = "leaderrun/name"       // the lease name, when the object name differs
	annHeldUntil = "leaderrun/held-until" // the end of a hold (RFC 3339), ReleaseHeld
	labelRole    = "leaderrun/role"       // "standby" or "history" on leaderrun's other objects
	labelOf      = "leaderrun/of"         // on a standby: a hash of its lease's object name
	labelManaged = "app.kubernetes.io/managed-by"
)

// ObjectName returns the name of the Lease object that holds the lease
// name (see objName), for kubectl and for tests.
func ObjectName(name string) string { return objName(name) }

// objName maps a lease name to a Lease object name: the name itself when
// it is already a valid object name of at most 200 bytes with no label
// starting "lr--" and not of the hashed names' shape (so `kubectl get
// lease NAME` finds it), else the first 50 bytes of a lower-case form of it
// ('-' for anything but letters and digits) and a hash of the name: one
// DNS label. So different names never share an object: a name of the
// hashed shape, such as job-ad617a0fdd (the hashed name of "Job"), is
// hashed itself. (Before, the two shared one, and the annotation
// leaderrun/name refused the second; their history, standbys and token
// counter were shared.)
func objName(name string) string {
	if dnsSubdomain(name) && len(name) <= 200 && !hasAuxLabel(name) && !hashedShape(name) {
		return name
	}
	var b strings.Builder
	for i := 0; i < len(name) && b.Len() < 50; i++ {
		c := name[i]
		switch {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
			b.WriteByte(c)
		case 'A' <= c && c <= 'Z':
			b.WriteByte(c + 'a' - 'A')
		default:
			b.WriteByte('-')
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		s = "lease"
	}
	return s + "-" + hashOf(name)[:10]
}

// auxLabel starts the last label of the object names leaderrun derives from
// a lease's own (auxName). objName never keeps a name with such a label,
// and its hashed names are one label, so these names are none that a lease
// name maps to, by construction: a lease named x.history or
// x.standby-0123456789abcdef is not lease x's history or standby.
const auxLabel = "lr--"

// auxName is the object of kind (history, standby-ID, token) of lease name:
// OBJ.lr--KIND, with OBJ = objName(name). It fits: OBJ has at most 200
// bytes, the label at most 28.
func auxName(name, kind string) string { return objName(name) + "." + auxLabel + kind }

// hasAuxLabel reports whether a label of the dotted name s starts with
// auxLabel.
func hasAuxLabel(s string) bool {
	for l := range strings.SplitSeq(s, ".") {
		if strings.HasPrefix(l, auxLabel) {
			return true
		}
	}
	return false
}

// hashedShape reports whether s could be a hashed object name of objName:
// one DNS label of at most 50 bytes, '-', and 10 lower-case hex digits.
func hashedShape(s string) bool {
	i := len(s) - 11
	return i >= 1 && i <= 50 && s[i] == '-' && s[i-1] != '-' && dnsLabel(s) &&
		strings.Trim(s[i+1:], "0123456789abcdef") == ""
}

// hashOf is a short hex digest of s, fit for a label value.
func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:8])
}

// dnsSubdomain reports whether s is an RFC 1123 subdomain: dot-separated
// labels of lower-case letters, digits and '-'.
func dnsSubdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	for _, l := range strings.Split(s, ".") {
		if !dnsLabel(l) {
			return false
		}
	}
	return true
}

// record is what leaderrun reads from a Lease object.
type record struct {
	holder    string // spec.holderIdentity; empty: released
	id        string
	token     uint64
	ttl       time.Duration // spec.leaseDurationSeconds
	since     time.Time     // spec.acquireTime
	heldUntil time.Time
}

func readRecord(l *coordv1.Lease) record {
	var r record
	if l.Spec.HolderIdentity != nil {
		r.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseDurationSeconds != nil && *l.Spec.LeaseDurationSeconds > 0 {
		r.ttl = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	if l.Spec.AcquireTime != nil {
		r.since = l.Spec.AcquireTime.Time
	}
	r.id = l.Annotations[annID]
	r.token, _ = strconv.ParseUint(l.Annotations[annToken], 10, 64)
	r.heldUntil, _ = time.Parse(time.RFC3339Nano, l.Annotations[annHeldUntil])
	return r
}

// holderOf is the record as a lease.Holder (ID left out).
func holderOf(name string, r record) lease.Holder {
	if r.holder == "" { // released: whoever holds it now is unknown
		return lease.Holder{Name: name}
	}
	return lease.Holder{Name: name, Label: r.holder, Token: r.token, Since: r.since, TTL: r.ttl, HeldUntil: r.heldUntil}
}

// newObject is the Lease object of an acquisition.
func newObject(obj, name string, req lease.Request, token uint64, since time.Time) *coordv1.Lease {
	l := &coordv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name:        obj,
		Labels:      map[string]string{labelManaged: "leaderrun"},
		Annotations: map[string]string{annName: name},
	}}
	setHolder(l, req.Label, req.ID, token, req.TTL, since)
	return l
}

// setHolder writes an acquisition into l: the LeaseLock fields and our
// annotations; renewTime is the acquisition's time.
func setHolder(l *coordv1.Lease, label, id string, token uint64, ttl time.Duration, since time.Time) {
	secs := int32(ttl / time.Second)
	at := metav1.NewMicroTime(since)
	l.Spec.HolderIdentity = &label
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.AcquireTime = &at
	l.Spec.RenewTime = &at
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[annID] = id
	l.Annotations[annToken] = strconv.FormatUint(token, 10)
	delete(l.Annotations, annHeldUntil)
}

// rv parses a resourceVersion: with etcd behind the API server, the
// revision of the object's last write (see the package doc).
func rv(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && n > 0
}
