// Package storeerr holds the error-writing pieces the network stores
// (redislease, etcdlease, pglease, bloblease) share: every error they return is a
// *lease.Error whose message is one sentence with secrets masked out, and
// which is the lease sentinel and context error it stands for.
//
// It imports net and crypto/x509, so the file store and the base program
// must not import it.
package storeerr

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"unicode"
	"unicode/utf8"

	"github.com/leaderrun/leaderrun/lease"
)

// Config returns a store URL or option problem: a *lease.Error that wraps
// lease.ErrConfig, with the message format and args write.
func Config(format string, args ...any) error {
	return lease.NewError(fmt.Sprintf(format, args...), lease.ErrConfig)
}

// New returns a *lease.Error with message msg that is kind (a lease
// sentinel, or nil for neither) and, when cause is or wraps
// context.Canceled or context.DeadlineExceeded, that context error too, so
// that errors.Is(err, context.Canceled) works on the result while the vendor
// error cause stays out of the chain.
func New(msg string, kind, cause error) error {
	var ctxErr error
	switch {
	case errors.Is(cause, context.Canceled):
		ctxErr = context.Canceled
	case errors.Is(cause, context.DeadlineExceeded):
		ctxErr = context.DeadlineExceeded
	}
	return lease.NewError(msg, kind, ctxErr)
}

// Redact returns a server's answer or other foreign text that is not known
// to quote credentials, fit to be quoted in one of ours: a URL's user info
// becomes "xxxxx@" and the value of a credential parameter (password=,
// sslpassword=, sig=, AccountKey=, SharedAccessSignature=) becomes "xxxxx".
// Nothing else is touched, so a password that is a common word does not
// blank out the server's words.
func Redact(s string) string {
	re := redactors()
	s = re.urlUserinfo.ReplaceAllString(s, "${1}xxxxx@")
	return re.credParam.ReplaceAllString(s, "${1}xxxxx")
}

// Quote is Redact for free-form text from a client library (a parse error,
// a log entry, a credential chain's complaint), the last line of defence
// against one that puts a credential in its text: every secret of at least
// minLen bytes (and at least one) is also replaced by "xxxxx" where it
// stands as a whole token, not inside a longer word (a password "pass"
// leaves "password" alone). leaderrun's own words around quoted text never
// go through Quote: they print a store's URL with its password left out.
func Quote(s string, secrets []string, minLen int) string {
	s = Redact(s)
	minLen = max(minLen, 1)
	for _, x := range secrets {
		if len(x) >= minLen {
			s = maskTokens(s, x)
		}
	}
	return s
}

// redactors compiles Redact's expressions on first use, not at every
// store program's start: a run that goes well never redacts anything.
var redactors = sync.OnceValue(func() (r struct{ urlUserinfo, credParam *regexp.Regexp }) {
	// urlUserinfo is a URL's scheme and user info ("redis://u:pw@").
	r.urlUserinfo = regexp.MustCompile(`(?i)\b([a-z][a-z0-9+.-]*://)[^/?#@\s]*@`)
	// credParam is a credential parameter's name and '=' up to its value.
	r.credParam = regexp.MustCompile(`(?i)\b((?:ssl)?password\s*=\s*|sig=|accountkey=|sharedaccesssignature=)(?:'[^']*'|"[^"]*"|[^\s&;,'"]+)`)
	return r
})

// maskTokens replaces x in s where it is not part of a longer word: a
// letter, digit or '_' of x at its start or end must not touch another.
func maskTokens(s, x string) string {
	var b strings.Builder
	for {
		i := strings.Index(s, x)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		j := i + len(x)
		first, _ := utf8.DecodeRuneInString(x)
		last, _ := utf8.DecodeLastRuneInString(x)
		before, _ := utf8.DecodeLastRuneInString(s[:i])
		after, _ := utf8.DecodeRuneInString(s[j:])
		if (i > 0 && wordRune(first) && wordRune(before)) || (j < len(s) && wordRune(last) && wordRune(after)) {
			// Inside a word: keep its first rune and look again after it.
			_, n := utf8.DecodeRuneInString(s[i:])
			b.WriteString(s[:i+n])
			s = s[i+n:]
			continue
		}
		b.WriteString(s[:i])
		b.WriteString("xxxxx")
		s = s[j:]
	}
}

func wordRune(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// FirstLine is s up to its first newline.
func FirstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// NetReason is the root cause of a network or TLS certificate error without
// the addresses and operations around it: the errno ("connection refused"),
// the DNS failure, or the certificate problem. It is "" when err is none of
// these.
func NetReason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var dns *net.DNSError
	if errors.As(err, &dns) {
		if dns.IsNotFound {
			return "the host name " + dns.Name + " does not resolve (no such host: a typo, or a name this host's DNS does not know)"
		}
		return dns.Err
	}
	var (
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
	)
	switch {
	case errors.As(err, &unknownCA):
		return "certificate signed by an unknown authority"
	case errors.As(err, &hostErr):
		return hostErr.Error()
	case errors.As(err, &invalid):
		return invalid.Error()
	}
	return ""
}
