package s3lease

import (
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
)

// Schemes are the URL schemes this store serves.
var Schemes = []string{"s3"}

// DefaultPrefix is where the objects go in a bucket whose URL names no
// prefix.
const DefaultPrefix = "leaderrun/"

// config is what a store URL says.
type config struct {
	bucket   string
	prefix   string // ends with "/"
	endpoint string // "" for AWS's own
	region   string
	// pathStyle addresses the bucket in the path (MinIO, most gateways):
	// the default with an endpoint.
	pathStyle bool
	poll      time.Duration
	// display is the URL without its query (it holds no credential).
	display string
}

// parseURL reads s3://BUCKET[/PREFIX][?endpoint=URL][&region=R]
// [&path-style=true|false][&poll=DURATION].
func parseURL(raw string) (*config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, storeerr.Config("the S3 store URL is not a URL: %s (use s3://BUCKET[/PREFIX])", storeerr.Quote(err.Error(), nil, 0))
	}
	if !strings.EqualFold(u.Scheme, "s3") {
		return nil, storeerr.Config("the S3 store takes s3:// URLs, not %s://", u.Scheme)
	}
	if u.User != nil {
		return nil, storeerr.Config("the S3 store URL must not carry credentials: give them as the AWS SDK takes them (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile, an instance or pod role)")
	}
	if u.Host == "" || u.Opaque != "" {
		return nil, storeerr.Config("the S3 store URL names no bucket (use s3://BUCKET[/PREFIX])")
	}
	c := &config{bucket: u.Host, prefix: DefaultPrefix, display: "s3://" + u.Host + u.EscapedPath()}
	if p := strings.Trim(u.Path, "/"); p != "" {
		c.prefix = p + "/"
	}
	if err := c.query(u.Query()); err != nil {
		return nil, err
	}
	return c, nil
}

// query reads the URL's parameters into c.
func (c *config) query(q url.Values) error {
	for k, vs := range q {
		v := vs[len(vs)-1]
		switch k {
		case "endpoint":
			e, err := url.Parse(v)
			if err != nil || (e.Scheme != "http" && e.Scheme != "https") || e.Host == "" || e.User != nil {
				return storeerr.Config("the S3 store's endpoint= must be an http:// or https:// URL without credentials, such as https://ACCOUNT.r2.cloudflarestorage.com")
			}
			c.endpoint = strings.TrimSuffix(v, "/")
			c.pathStyle = true
		case "region":
			c.region = v
		case "path-style":
			// read below, after endpoint= set its default
		case "poll":
			d, err := time.ParseDuration(v)
			if err != nil || d < 100*time.Millisecond || d > time.Minute {
				return storeerr.Config("the S3 store's poll= must be a duration from 100ms to 1m, such as 1s")
			}
			c.poll = d
		default:
			return storeerr.Config("the S3 store URL has an unknown parameter %q (known: endpoint, region, path-style, poll)", k)
		}
	}
	if vs, ok := q["path-style"]; ok {
		b, err := strconv.ParseBool(vs[len(vs)-1])
		if err != nil {
			return storeerr.Config("the S3 store's path-style= must be true or false")
		}
		c.pathStyle = b
	}
	return nil
}

// where names the store in messages: bucket, prefix and endpoint.
func (c *config) where() string {
	at := "AWS"
	if c.endpoint != "" {
		at = c.endpoint
	}
	return "S3 bucket " + c.bucket + " (prefix " + c.prefix + ") at " + at
}
