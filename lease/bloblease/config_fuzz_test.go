package bloblease

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// FuzzParseURL feeds parseURL azblob URLs with a SAS signature in the query
// ("sig=SIG", or "sig" and a mistyped separator such as "sig:SIG") and a
// password in the authority (":PASSWORD@") amid arbitrary text. It must
// never panic, every error wraps lease.ErrConfig, and no error quotes the
// signature or the password. An accepted URL keeps its SAS out of
// serviceURL.
func FuzzParseURL(f *testing.F) {
	for _, s := range [][2]string{
		{"azblob+http://127.0.0.1:10000/devstoreaccount1/leaderrun?sv=2022-11-02&", ""},
		{"azblob://myaccount/c?", "&se=2030"},
		{"azblob+https://myaccount.blob.core.windows.net/c?sp=rl&", ""},
		{"azblob:///c?poll=1s&", ""},
		{"azblob://Bad_Account/c?", ""},
		{"azblob+https://h:99999/a/c?", ""},
		{"azblob://myaccount/c?poll=-1s&", ""},
		{"azblob://myaccount/c/d?", ""},
		{"azblob://myaccount/c?", "#frag"},
		{"azblob://myaccount/c?%zz&", ""},
		{"azblob:/myaccount?", ""},
	} {
		f.Add(s[0], "S3cr3tSignatureValue", s[1], "u", byte('='))
	}
	f.Add("azblob://myaccount/c?sv=1&", "S3cr3tSignatureValue", "", "", byte(':'))
	// Found by the chaos/fuzz work: a mistyped separator puts the signature
	// into an unknown parameter's name.
	f.Add("azblob://myaccount/c?", "S3cr3tSignatureValue", "=", "", byte('.'))
	f.Add("azblob://", "S3cr3tPassw0rd", "myaccount/c", "", byte('='))
	f.Add("azblob+https://", "S3cr3tPassw0rd", "host/acct/c", "user", byte('='))
	f.Fuzz(func(t *testing.T, before, secret, after, user string, sep byte) {
		if !leasetest.SecretLike(secret) || strings.Contains(before, secret) || strings.Contains(after, secret) || strings.Contains(user, secret) {
			return
		}
		var raws []string
		if q := strings.Index(before, "?"); q >= 0 && !strings.Contains(before[:q], "#") && !strings.Contains(before[q:], "#") {
			raws = append(raws, before+"sig="+secret+after)
			if sep > ' ' && sep < 0x7f && sep != '&' && sep != '#' && !('a' <= sep && sep <= 'z' || 'A' <= sep && sep <= 'Z' || '0' <= sep && sep <= '9') {
				raws = append(raws, before+"sig"+string(rune(sep))+secret+after)
			}
		} else if !strings.ContainsAny(before+user, "?#") {
			raws = append(raws, before+user+":"+secret+"@"+after)
		}
		for _, raw := range raws {
			tg, err := parseURL(raw)
			if err != nil {
				if !errors.Is(err, lease.ErrConfig) {
					t.Fatalf("parseURL(%q) error %v does not wrap lease.ErrConfig", raw, err)
				}
				if strings.Contains(err.Error(), secret) {
					repl := strings.Repeat("Q", len(secret))
					if repl == secret {
						repl = strings.Repeat("Z", len(secret))
					}
					fixed := strings.Replace(raw, secret, repl, 1)
					if _, err2 := parseURL(fixed); err2 == nil || !strings.Contains(err2.Error(), secret) {
						t.Fatalf("parseURL(%q): error %q contains the secret", raw, err)
					}
				}
				continue
			}
			if strings.Contains(tg.serviceURL, "?") || strings.Contains(tg.serviceURL, secret) && !strings.Contains(tg.account, secret) {
				t.Fatalf("parseURL(%q): serviceURL %q carries the query or the secret", raw, tg.serviceURL)
			}
			if tg.container == "" || tg.poll < 0 {
				t.Fatalf("parseURL(%q) = %+v: empty container or negative poll", raw, tg)
			}
		}
	})
}

// FuzzConnString feeds parseConnString and resolve a connection string with
// an AccountKey and a SharedAccessSignature amid arbitrary text. Neither may
// panic or put the key or signature into an error, and a key or SAS that
// resolve chose is listed in auth.secrets.
func FuzzConnString(f *testing.F) {
	f.Add("DefaultEndpointsProtocol=https;AccountName=myaccount;AccountKey=", "S3cr3tK3yValue0000", ";EndpointSuffix=core.windows.net", "azblob://myaccount/c")
	f.Add("AccountName=devstoreaccount1;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;AccountKey=", "S3cr3tK3yValue0000", "", "azblob:///c")
	f.Add("BlobEndpoint=https://x.blob.core.windows.net;SharedAccessSignature=sv=1&sig=", "S3cr3tK3yValue0000", "", "azblob:///c")
	f.Add("AccountKey=", "S3cr3tK3yValue0000", "", "azblob:///c")
	f.Add("UseDevelopmentStorage=true;x", "S3cr3tK3yValue0000", "", "azblob:///")
	f.Add("garbage", "S3cr3tK3yValue0000", "no equals", "azblob:///c")
	f.Fuzz(func(t *testing.T, before, secret, after, storeURL string) {
		if !leasetest.SecretLike(secret) || strings.Contains(before+after+storeURL, secret) {
			return
		}
		cs := before + secret + after
		if _, err := parseConnString(cs); err != nil {
			if !errors.Is(err, lease.ErrConfig) {
				t.Fatalf("parseConnString(%q) error %v does not wrap lease.ErrConfig", cs, err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("parseConnString(%q): error %q contains the secret", cs, err)
			}
		}
		tg, err := parseURL(storeURL)
		if err != nil {
			return
		}
		for _, envVar := range []string{envConnString, envKey, envSAS} {
			getenv := func(k string) string {
				if k == envVar {
					return cs
				}
				return ""
			}
			a, notes, err := resolve(tg, getenv)
			if err != nil {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("resolve(%q, %s=%q): error %q contains the secret", storeURL, envVar, cs, err)
				}
				continue
			}
			for _, n := range notes {
				if strings.Contains(n, secret) {
					t.Fatalf("resolve(%q, %s=%q): note %q contains the secret", storeURL, envVar, cs, n)
				}
			}
			sec := a.secrets()
			if a.key != "" && !slices.Contains(sec, a.key) || a.sas != "" && !slices.Contains(sec, a.sas) {
				t.Fatalf("resolve(%q, %s=%q): chosen key/SAS not in secrets()", storeURL, envVar, cs)
			}
			if strings.Contains(a.serviceURL, secret) && !strings.Contains(a.account, secret) {
				t.Fatalf("resolve(%q, %s=%q): serviceURL %q contains the secret", storeURL, envVar, cs, a.serviceURL)
			}
		}
	})
}

// FuzzHolderFrom checks the Azure metadata decoder: any metadata decodes
// without panicking, keys match in any case, and a holder label written
// with escapeMeta (which must yield a valid header value) reads back as is.
func FuzzHolderFrom(f *testing.F) {
	f.Add("host:42", "7", "2026-01-02T03:04:05.123456Z", "15", "LEADERRUN_HOLDER")
	f.Add("a b%c\x1b[31m\xff", "18446744073709551615", "bad", "x", "leaderrun_Holder")
	f.Add("100%", "-1", "", "99999999999999999999", "leaderrun_holder")
	f.Add("%41", "1e15", "2026-01-02T03:04:05Z", "60", "other")
	// Edited metadata: a negative TTL, and one whose seconds overflow a Duration.
	f.Add("h", "7", "", "-1", "leaderrun_holder")
	f.Add("h", "7", "", "9227000000", "leaderrun_holder")
	f.Fuzz(func(t *testing.T, holder, token, since, ttl, holderKey string) {
		md := map[string]*string{
			holderKey:   to(escapeMeta(holder)),
			metaToken:   to(token),
			metaSince:   to(since),
			metaTTL:     to(ttl),
			"leaderrun": nil,
		}
		h := holderFrom("job", md)
		if h.Name != "job" {
			t.Fatalf("holderFrom lost the name: %+v", h)
		}
		e := escapeMeta(holder)
		for i := 0; i < len(e); i++ {
			if e[i] <= ' ' || e[i] >= 0x7f {
				t.Fatalf("escapeMeta(%q) = %q: byte %#x is not a valid header value byte", holder, e, e[i])
			}
		}
		if strings.EqualFold(holderKey, metaHolder) && h.Label != holder {
			t.Fatalf("holderFrom: holder %q read back as %q (stored %q)", holder, h.Label, e)
		}
		if h.TTL < 0 || h.TTL > 0 && h.TTL%time.Second != 0 {
			t.Fatalf("holderFrom: ttl %q decoded as %v", ttl, h.TTL)
		}
	})
}
