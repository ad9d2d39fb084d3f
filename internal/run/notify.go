package run

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/say"
	"github.com/leaderrun/leaderrun/lease"
)

// notifyVar is the variable systemd sets for a Type=notify service.
const notifyVar = "NOTIFY_SOCKET"

// notifier sends sd_notify(3) messages: one datagram per message to the
// AF_UNIX socket named by NOTIFY_SOCKET, a path or, with a leading '@', an
// abstract name. It is the documented protocol in a few lines rather than
// coreos/go-systemd's daemon package, which would link net's Unix-socket
// dialing into every binary and reads os.Getenv itself. A nil
// *notifier sends nothing. Sending is best effort: systemd may be gone, and
// a failed message must never stop the job.
type notifier struct {
	mu   sync.Mutex
	fd   int
	addr *unix.SockaddrUnix
	log  *slog.Logger
}

// newNotifier returns the notifier for NOTIFY_SOCKET, or nil when it is
// unset or not a Unix socket address (vsock: is not supported).
func newNotifier(getenv func(string) string, log *slog.Logger) *notifier {
	name := getenv(notifyVar)
	if name == "" || (name[0] != '/' && name[0] != '@') {
		if name != "" {
			log.Debug("NOTIFY_SOCKET is not a Unix socket path or abstract name; not notifying systemd")
		}
		return nil
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		log.Debug("cannot make a socket for systemd notifications", "err", err)
		return nil
	}
	// x/sys/unix turns a leading '@' into the abstract namespace's NUL.
	return &notifier{fd: fd, addr: &unix.SockaddrUnix{Name: name}, log: log}
}

// send sends one message of lines such as "READY=1" or "STATUS=…".
func (n *notifier) send(lines ...string) {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fd < 0 {
		return
	}
	msg := strings.Join(lines, "\n")
	// MSG_DONTWAIT: a receiver whose queue is full (a stuck systemd or
	// notify proxy) would otherwise block sendto, and with it the run: the
	// release, health checks and signal forwarding. A message that does
	// not fit now is dropped.
	if err := unix.Sendto(n.fd, []byte(msg), unix.MSG_DONTWAIT, n.addr); err != nil {
		n.log.Debug("systemd notification not sent", "err", err)
	}
}

// status sends STATUS=s, with line breaks (which would end the field)
// replaced.
func (n *notifier) status(s string) {
	n.send("STATUS=" + strings.NewReplacer("\n", " ", "\r", " ").Replace(s))
}

// close closes the socket. Idempotent.
func (n *notifier) close() {
	if n == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.fd >= 0 {
		unix.Close(n.fd)
		n.fd = -1
	}
}

// notifyWaiting wraps an OnWait reporter so that systemd's status shows
// whom leaderrun waits for.
func notifyWaiting(n *notifier, name string, report func(lease.WaitEvent)) func(lease.WaitEvent) {
	if n == nil {
		return report
	}
	return func(ev lease.WaitEvent) {
		report(ev)
		switch ev.Kind {
		case lease.WaitStarted, lease.WaitHolderChanged:
			n.status(waitingStatus(name, ev.By, time.Now()))
		}
	}
}

// waitingStatus is the STATUS= text of a standby: "waiting for lease X held
// by H since T".
func waitingStatus(name string, by lease.Holder, now time.Time) string {
	s := "waiting for lease " + name
	s += " held by " + say.HolderName(by.Label)
	if !by.Since.IsZero() {
		s += " since " + say.TimeZone(by.Since, now)
	}
	if !by.HeldUntil.IsZero() {
		s += " (kept taken until " + say.TimeZone(by.HeldUntil, now) + ")"
	}
	return s
}

// leadingStatus is the STATUS= text of the leader: "leading X, token N,
// since T".
func leadingStatus(name string, h lease.Holder, now time.Time) string {
	since := h.Since
	if since.IsZero() {
		since = now
	}
	return fmt.Sprintf("leading %s, token %d, since %s", name, h.Token, say.TimeZone(since, now))
}

// withoutNotifySocket removes NOTIFY_SOCKET from env when n is in use: the
// unit's readiness is leaderrun's to report (as sd_notify's
// unset_environment does), and a child that notified too would contradict it
// under NotifyAccess=all.
func withoutNotifySocket(n *notifier, env []string) []string {
	if n == nil {
		return env
	}
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, notifyVar+"=") {
			out = append(out, kv)
		}
	}
	return out
}
