package gcslease

import (
	"net/url"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
)

// Schemes are the URL schemes this store serves.
var Schemes = []string{"gs"}

// DefaultPrefix is where the objects go in a bucket whose URL names no
// prefix.
const DefaultPrefix = "leaderrun/"

// config is what a store URL (and STORAGE_EMULATOR_HOST) says.
type config struct {
	bucket string
	prefix string // ends with "/"
	// userProject is the project billed for a Requester Pays bucket.
	userProject string
	poll        time.Duration
	// emulator is STORAGE_EMULATOR_HOST as a URL ("" for Google's own).
	emulator string
	// endpoint is endpoint=, another address of the JSON API reached
	// with credentials (Private Service Connect); "" for Google's own.
	endpoint string
	// display is the URL without its query (it holds no credential).
	display string
}

// parseURL reads gs://BUCKET[/PREFIX][?user-project=ID][&endpoint=URL]
// [&poll=DURATION].
func parseURL(raw string) (*config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, storeerr.Config("the GCS store URL is not a URL: %s (use gs://BUCKET[/PREFIX])", storeerr.Quote(err.Error(), nil, 0))
	}
	if !strings.EqualFold(u.Scheme, "gs") {
		return nil, storeerr.Config("the GCS store takes gs:// URLs, not %s://", u.Scheme)
	}
	if u.User != nil {
		return nil, storeerr.Config("the GCS store URL must not carry credentials: give them as Google's tools take them (Application Default Credentials: GOOGLE_APPLICATION_CREDENTIALS, gcloud auth application-default login, or the service account of the machine)")
	}
	if u.Host == "" || u.Opaque != "" {
		return nil, storeerr.Config("the GCS store URL names no bucket (use gs://BUCKET[/PREFIX])")
	}
	if !validBucket(u.Host) {
		return nil, storeerr.Config("the GCS store URL's bucket %q is not a bucket name (lower-case letters, digits, '-', '_' and '.', 3 to 222 characters)", u.Host)
	}
	c := &config{bucket: u.Host, prefix: DefaultPrefix, display: "gs://" + u.Host + u.EscapedPath()}
	if p := strings.Trim(u.Path, "/"); p != "" {
		c.prefix = p + "/"
	}
	for k, vs := range u.Query() {
		v := vs[len(vs)-1]
		switch k {
		case "user-project":
			if v == "" {
				return nil, storeerr.Config("the GCS store's user-project= names no project")
			}
			c.userProject = v
		case "endpoint":
			e, err := url.Parse(v)
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil || e.RawQuery != "" {
				return nil, storeerr.Config("the GCS store's endpoint= must be an http:// or https:// URL without credentials or query, such as https://storage-ENDPOINT.p.googleapis.com")
			}
			c.endpoint = strings.TrimSuffix(e.Scheme+"://"+e.Host+e.Path, "/")
		case "poll":
			d, err := time.ParseDuration(v)
			if err != nil || d < 100*time.Millisecond || d > time.Minute {
				return nil, storeerr.Config("the GCS store's poll= must be a duration from 100ms to 1m, such as 1s")
			}
			c.poll = d
		default:
			return nil, storeerr.Config("the GCS store URL has an unknown parameter %q (known: user-project, endpoint, poll)", k)
		}
	}
	return c, nil
}

// validBucket reports whether name can be a GCS bucket's: what GCS
// allows, so that a typo is refused before any request.
func validBucket(name string) bool {
	if len(name) < 3 || len(name) > 222 {
		return false
	}
	for _, r := range name {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '_' && r != '.' {
			return false
		}
	}
	return true
}

// emulatorURL turns STORAGE_EMULATOR_HOST into a URL as Google's client
// does (host:port means http://host:port).
func emulatorURL(host string) (string, error) {
	if !strings.Contains(host, "://") {
		host = "http://" + host
	}
	u, err := url.Parse(host)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return "", storeerr.Config("STORAGE_EMULATOR_HOST must be HOST:PORT or an http:// or https:// URL without credentials, such as 127.0.0.1:4443")
	}
	return u.Scheme + "://" + u.Host, nil
}

// where names the store in messages: bucket, prefix and endpoint.
func (c *config) where() string {
	at := "Google"
	switch {
	case c.endpoint != "":
		at = c.endpoint
	case c.emulator != "":
		at = c.emulator + " (STORAGE_EMULATOR_HOST)"
	}
	return "GCS bucket " + c.bucket + " (prefix " + c.prefix + ") at " + at
}
