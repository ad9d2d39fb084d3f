package bloblease

import (
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
)

// DefaultContainer is the container used when the store URL names none.
const DefaultContainer = "leaderrun"

// Azurite's well-known development account, used for UseDevelopmentStorage=true.
const (
	devAccount  = "devstoreaccount1"
	devKey      = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
	devEndpoint = "http://127.0.0.1:10000/devstoreaccount1"
)

// Environment variables read through Options.Getenv, in the spelling the
// Azure CLI and SDKs use.
const (
	envConnString = "AZURE_STORAGE_CONNECTION_STRING"
	envAccount    = "AZURE_STORAGE_ACCOUNT"
	envKey        = "AZURE_STORAGE_KEY"
	envSAS        = "AZURE_STORAGE_SAS_TOKEN"
)

// Schemes returns the URL schemes this package opens.
func Schemes() []string { return []string{"azblob", "azblob+https", "azblob+http"} }

// accountName reports whether s is a storage account name: 3-24 lowercase
// letters and digits. (Plain loops rather than regular expressions, which
// every run would compile at the program's start.)
func accountName(s string) bool {
	if len(s) < 3 || len(s) > 24 {
		return false
	}
	for i := range len(s) {
		if !lowerAlnum(s[i]) {
			return false
		}
	}
	return true
}

// containerName reports whether s is a container name: 3-63 lowercase
// letters, digits and hyphens, beginning and ending with a letter or digit,
// no two hyphens in a row.
func containerName(s string) bool {
	if len(s) < 3 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := range len(s) {
		if c := s[i]; !lowerAlnum(c) && (c != '-' || s[i-1] == '-') {
			return false
		}
	}
	return true
}

func lowerAlnum(c byte) bool { return 'a' <= c && c <= 'z' || '0' <= c && c <= '9' }

// target is a parsed store URL: where the container is, before credentials.
type target struct {
	serviceURL string // scheme://host[:port][/account], no query, no trailing slash
	account    string // empty when only the environment can tell (short form)
	container  string
	sas        string // SAS query from the URL (secret), without "?"
	poll       time.Duration
	fromEnv    bool // short form: the endpoint comes from the environment
}

// parseURL parses a store URL without touching the network or the
// environment. Its errors never quote the URL's query (a SAS). It works in
// steps: the scheme and URL syntax, the query, the host and path (as the
// scheme reads them), then the container name.
func parseURL(raw string) (target, error) {
	var t target
	scheme, _, ok := strings.Cut(raw, "://")
	if !ok {
		return target{}, badURL("want azblob://ACCOUNT/CONTAINER, azblob+https://HOST/CONTAINER or azblob:///CONTAINER")
	}
	scheme = strings.ToLower(scheme)
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse quotes the whole input, SAS included: say less.
		return target{}, badURL("cannot parse it as a URL")
	}
	if u.User != nil {
		return target{}, badURL("user or password in the URL is not supported; put the key in %s or use a SAS query", envKey)
	}
	if u.Fragment != "" {
		return target{}, badURL("unexpected #fragment")
	}
	if err := t.parseQuery(u.RawQuery); err != nil {
		return target{}, err
	}
	segs := splitPath(u.Path)
	switch scheme {
	case "azblob":
		err = t.accountURL(u, segs)
	case "azblob+https", "azblob+http":
		err = t.endpointURL(scheme, u, segs)
	default:
		err = badURL("unknown scheme %s; want azblob, azblob+https or azblob+http", safeEcho(scheme))
	}
	if err != nil {
		return target{}, err
	}
	if t.container == "" {
		t.container = DefaultContainer
	}
	if !containerName(t.container) {
		return target{}, badURL("%s is not a container name (3-63 lowercase letters, digits and single hyphens)", safeEcho(t.container))
	}
	return t, nil
}

// badURL returns a store URL error; format and args must never carry a
// credential.
func badURL(format string, args ...any) error {
	return storeerr.Config("bad azblob store URL: "+format, args...)
}

// accountURL reads an azblob:// URL's host and path segs: ACCOUNT/CONTAINER,
// or the short form azblob:///CONTAINER, whose endpoint the environment
// gives.
func (t *target) accountURL(u *url.URL, segs []string) error {
	if u.Host == "" {
		// Short form: azblob:///CONTAINER or azblob://.
		t.fromEnv = true
		if len(segs) > 1 {
			return badURL("azblob:///CONTAINER takes one path element, got %d", len(segs))
		}
	} else {
		if u.Port() != "" || !accountName(u.Host) {
			return badURL("azblob://ACCOUNT/CONTAINER: %s is not a storage account name (3-24 lowercase letters and digits); use azblob+https://HOST/CONTAINER for other endpoints", safeEcho(u.Host))
		}
		if len(segs) > 1 {
			return badURL("azblob://ACCOUNT/CONTAINER takes one path element, got %d", len(segs))
		}
		t.account = u.Host
		t.serviceURL = "https://" + u.Host + ".blob.core.windows.net"
	}
	if len(segs) == 1 {
		t.container = segs[0]
	}
	return nil
}

// endpointURL reads an azblob+https:// or azblob+http:// URL's host and
// path segs, path style (/ACCOUNT[/CONTAINER]) or host style ([/CONTAINER]).
func (t *target) endpointURL(scheme string, u *url.URL, segs []string) error {
	if u.Hostname() == "" {
		return badURL("%s:// needs a host", scheme)
	}
	base := strings.TrimPrefix(scheme, "azblob+") + "://" + u.Host
	// Path style (Azurite, IP endpoints): /ACCOUNT[/CONTAINER].
	// Host style (ACCOUNT.blob.core.windows.net): [/CONTAINER].
	host := u.Hostname()
	pathStyle := len(segs) == 2 || host == "localhost" || net.ParseIP(host) != nil
	switch {
	case len(segs) > 2:
		return badURL("want /CONTAINER or /ACCOUNT/CONTAINER after the host, got %d path elements", len(segs))
	case pathStyle && len(segs) == 0:
		return badURL("%s://%s needs the account in the path, e.g. /devstoreaccount1/CONTAINER", scheme, safeEcho(u.Host))
	case pathStyle:
		t.account = segs[0]
		t.serviceURL = base + "/" + segs[0]
		if len(segs) == 2 {
			t.container = segs[1]
		}
	default:
		t.account, _, _ = strings.Cut(host, ".")
		t.serviceURL = base
		if len(segs) == 1 {
			t.container = segs[0]
		}
	}
	if !accountName(t.account) {
		return badURL("%s is not a storage account name (3-24 lowercase letters and digits)", safeEcho(t.account))
	}
	return nil
}

// parseQuery takes poll=DURATION out of the query; whatever is left must be
// a SAS token (it carries sig=). The raw SAS is kept byte for byte.
func (t *target) parseQuery(raw string) error {
	if raw == "" {
		return nil
	}
	if _, err := url.ParseQuery(raw); err != nil {
		return storeerr.Config("bad azblob store URL: cannot parse the query")
	}
	var rest, unknown []string
	hasSig := false
	for _, kv := range strings.Split(raw, "&") {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		switch strings.ToLower(k) {
		case "poll":
			v, err := url.QueryUnescape(v)
			d, perr := time.ParseDuration(v)
			if err != nil || perr != nil || d < 100*time.Millisecond || d > time.Minute {
				return storeerr.Config("bad azblob store URL: poll= wants a duration from 100ms to 1m")
			}
			t.poll = d
			continue
		case "sig":
			hasSig = true
		case "sv", "ss", "srt", "sp", "se", "st", "spr", "sr", "si", "sip", "skoid", "sktid",
			"skt", "ske", "sks", "skv", "saoid", "suoid", "scid", "sdd", "ses", "rscc", "rscd",
			"rsce", "rscl", "rsct", "sduoid", "skdutid":
		default:
			if strings.Contains(kv, "=") {
				unknown = append(unknown, safeKey(k))
			} else {
				unknown = append(unknown, "(a parameter without a value, not shown)")
			}
		}
		rest = append(rest, kv)
	}
	if len(unknown) > 0 && !hasSig {
		return storeerr.Config("bad azblob store URL: unknown query parameter(s) %s (only poll= and a SAS token are understood)", strings.Join(unknown, ", "))
	}
	if len(rest) > 0 && !hasSig {
		return storeerr.Config("bad azblob store URL: the SAS token in the query has no sig= parameter")
	}
	t.sas = strings.Join(rest, "&")
	return nil
}

// safeKey echoes an unknown query key only when it cannot be part of a
// signature whose separator was mistyped ("sig.SIGNATURE="): a short word of
// lower-case letters and underscores.
func safeKey(k string) string {
	if len(k) > 16 {
		return "(a parameter, not shown)"
	}
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r == '_') {
			return "(a parameter, not shown)"
		}
	}
	return strconv.Quote(k)
}

// safeEcho quotes s for an error message when it cannot be a credential: up
// to 40 letters, digits, '.', '-' and '_'. Anything else (an account key is
// 88 base64 characters, a SAS signature 44) is replaced by "(not shown)".
func safeEcho(s string) string {
	if len(s) > 40 {
		return "(not shown)"
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return "(not shown)"
		}
	}
	return strconv.Quote(s)
}

func splitPath(p string) []string {
	var segs []string
	for _, s := range strings.Split(p, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	return segs
}

// connString is the part of an Azure Storage connection string we use.
type connString struct {
	serviceURL string
	account    string
	key        string // secret
	sas        string // secret
}

// parseConnString parses AZURE_STORAGE_CONNECTION_STRING. Errors never quote it.
func parseConnString(s string) (connString, error) {
	kv := map[string]string{}
	for _, part := range strings.Split(strings.TrimSpace(s), ";") {
		if part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			return connString{}, storeerr.Config("%s: want KEY=VALUE pairs separated by ';'", envConnString)
		}
		kv[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	if strings.EqualFold(kv["usedevelopmentstorage"], "true") {
		c := connString{serviceURL: devEndpoint, account: devAccount, key: devKey}
		if p := kv["developmentstorageproxyuri"]; p != "" {
			c.serviceURL = strings.TrimRight(p, "/") + "/" + devAccount
		}
		return c, nil
	}
	c := connString{account: kv["accountname"], key: kv["accountkey"], sas: strings.TrimPrefix(kv["sharedaccesssignature"], "?")}
	switch {
	case kv["blobendpoint"] != "":
		c.serviceURL = strings.TrimRight(kv["blobendpoint"], "/")
	case c.account != "":
		proto, suffix := kv["defaultendpointsprotocol"], kv["endpointsuffix"]
		if proto == "" {
			proto = "https"
		}
		if suffix == "" {
			suffix = "core.windows.net"
		}
		c.serviceURL = proto + "://" + c.account + ".blob." + suffix
	default:
		return connString{}, storeerr.Config("%s has neither AccountName nor BlobEndpoint", envConnString)
	}
	if c.key != "" && c.account == "" {
		return connString{}, storeerr.Config("%s has an AccountKey but no AccountName", envConnString)
	}
	return c, nil
}

// credKind names the credential a store uses, for logs and errors.
type credKind string

const (
	credURLSAS     credKind = "SAS token from the store URL"
	credConnKey    credKind = "account key from " + envConnString
	credConnSAS    credKind = "SAS token from " + envConnString
	credKey        credKind = "account key from " + envKey
	credEnvSAS     credKind = "SAS token from " + envSAS
	credDefaultAzC credKind = "DefaultAzureCredential (environment, workload or managed identity, Azure CLI)"
)

// auth is the chosen endpoint and credential.
type auth struct {
	serviceURL string
	account    string
	kind       credKind
	key        string // shared key (secret), for credConnKey and credKey
	sas        string // SAS query (secret), for the SAS kinds
}

// secrets returns the strings that must never appear in output.
func (a auth) secrets() []string {
	var s []string
	if a.key != "" {
		s = append(s, a.key)
	}
	if a.sas != "" {
		s = append(s, a.sas)
		if q, err := url.ParseQuery(a.sas); err == nil {
			for _, v := range q["sig"] {
				s = append(s, v, url.QueryEscape(v))
			}
		}
	}
	return s
}

// resolve completes t with the environment: the endpoint for the short form,
// then the first credential found in this order:
//
//  1. a SAS token in the store URL (explicit beats ambient);
//  2. AZURE_STORAGE_CONNECTION_STRING (its AccountKey or SharedAccessSignature),
//     when the URL is the short form or names the same account;
//  3. AZURE_STORAGE_KEY for the URL's account (or AZURE_STORAGE_ACCOUNT for the
//     short form), unless AZURE_STORAGE_ACCOUNT names another account;
//  4. AZURE_STORAGE_SAS_TOKEN;
//  5. DefaultAzureCredential (https endpoints only).
func resolve(t target, getenv func(string) string) (auth, []string, error) {
	var notes []string // why an environment variable was skipped, for the debug log
	a := auth{serviceURL: t.serviceURL, account: t.account}
	var cs *connString
	if raw := getenv(envConnString); raw != "" {
		c, err := parseConnString(raw)
		if err != nil {
			return auth{}, nil, err
		}
		cs = &c
	}
	envAcct := getenv(envAccount)
	if t.fromEnv {
		switch {
		case cs != nil:
			a.serviceURL, a.account = cs.serviceURL, cs.account
		case envAcct != "":
			if !accountName(envAcct) {
				return auth{}, nil, storeerr.Config("%s=%s is not a storage account name", envAccount, safeEcho(envAcct))
			}
			a.serviceURL, a.account = "https://"+envAcct+".blob.core.windows.net", envAcct
		default:
			return auth{}, nil, storeerr.Config("azblob:///CONTAINER takes the account from %s or %s, and neither is set", envConnString, envAccount)
		}
	}
	switch {
	case t.sas != "":
		a.kind, a.sas = credURLSAS, t.sas
	case cs != nil && (t.fromEnv || cs.account == a.account) && cs.key != "":
		a.kind, a.key = credConnKey, cs.key
	case cs != nil && (t.fromEnv || cs.account == a.account) && cs.sas != "":
		a.kind, a.sas = credConnSAS, cs.sas
	case getenv(envKey) != "" && (envAcct == "" || a.account == "" || envAcct == a.account):
		if a.account == "" {
			a.account = envAcct
		}
		if a.account == "" {
			return auth{}, nil, storeerr.Config("%s is set but no account is named (URL or %s)", envKey, envAccount)
		}
		a.kind, a.key = credKey, getenv(envKey)
	case getenv(envSAS) != "":
		a.kind, a.sas = credEnvSAS, strings.TrimPrefix(getenv(envSAS), "?")
	default:
		a.kind = credDefaultAzC
		if !strings.HasPrefix(a.serviceURL, "https://") {
			return auth{}, nil, storeerr.Config("no storage key or SAS token found for %s, and Microsoft Entra sign-in needs https; for Azurite set %s or %s", a.serviceURL, envKey, envConnString)
		}
	}
	if cs != nil && !t.fromEnv && cs.account != a.account {
		notes = append(notes, envConnString+" ignored: it names another account")
	}
	if getenv(envKey) != "" && a.kind != credKey && envAcct != "" && a.account != "" && envAcct != a.account {
		notes = append(notes, envKey+" ignored: "+envAccount+" names another account")
	}
	return a, notes, nil
}
