package s3lease

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithymiddleware "github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/internal/storeerr"
	"github.com/leaderrun/leaderrun/lease/objlease"
)

// bucket is objlease's Bucket on an S3 client: keys under the URL's prefix.
type bucket struct {
	c   *s3.Client
	cfg *config
	// etags is what this store's ETags are: etagsMD5 when every write's
	// ETag was the MD5 of its content (S3 without SSE-KMS, most gateways),
	// etagsOpaque once one was not, etagsUnknown before any write.
	etags atomic.Int32
}

const (
	etagsUnknown = iota
	etagsMD5
	etagsOpaque
)

var (
	_ objlease.Bucket     = (*bucket)(nil)
	_ objlease.ProbeNoter = (*bucket)(nil)
)

// ProbeNote says whether the probe's writes had MD5 ETags.
func (b *bucket) ProbeNote() string {
	if b.etags.Load() == etagsMD5 {
		return "md5-etags"
	}
	return "opaque-etags"
}

// UseProbeNote takes what a remembered probe found of the ETags.
func (b *bucket) UseProbeNote(note string) {
	if note == "md5-etags" {
		b.etags.CompareAndSwap(etagsUnknown, etagsMD5)
	} else {
		b.etags.Store(etagsOpaque)
	}
}

// wrote records the ETag a write of body got.
func (b *bucket) wrote(body []byte, etag string) {
	if md5ETag(body) == etag {
		b.etags.CompareAndSwap(etagsUnknown, etagsMD5)
	} else {
		b.etags.Store(etagsOpaque)
	}
}

func md5ETag(body []byte) string {
	sum := md5.Sum(body)
	return `"` + hex.EncodeToString(sum[:]) + `"`
}

// tornTries bounds the reads of an object whose ETag is not its content's.
const tornTries = 5

func (b *bucket) key(k string) *string { return aws.String(b.cfg.prefix + k) }

// Where names the bucket, prefix and endpoint.
func (b *bucket) Where() string { return b.cfg.where() }

// Get reads an object whole (at most objlease.MaxObject bytes). On a
// store whose ETags are MD5s, an answer whose ETag is not its content's
// is read again: a server that answers a read while a write replaces the
// object can pair the old content with the new ETag (versitygw 1.8.0
// does), and a conditional write on that ETag would then rest on content
// that is gone.
func (b *bucket) Get(ctx context.Context, key string) (objlease.Object, error) {
	for range tornTries {
		o, err := b.get(ctx, key)
		if err != nil || b.etags.Load() != etagsMD5 || md5ETag(o.Body) == o.Version {
			return o, err
		}
	}
	return objlease.Object{}, lease.NewError(fmt.Sprintf("%s: read %s%s: %d answers in a row paired the content with another version's ETag (torn reads: the store does not read an object atomically)", b.Where(), b.cfg.prefix, key, tornTries), lease.ErrUnavailable)
}

func (b *bucket) get(ctx context.Context, key string) (objlease.Object, error) {
	out, err := b.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &b.cfg.bucket, Key: b.key(key)})
	if err != nil {
		o := objlease.Object{Date: errDate(err)}
		return o, b.classify("read", key, err)
	}
	defer out.Body.Close()
	body, err := io.ReadAll(io.LimitReader(out.Body, objlease.MaxObject+1))
	if err != nil {
		return objlease.Object{}, b.classify("read", key, err)
	}
	if len(body) > objlease.MaxObject {
		return objlease.Object{}, storeerr.Config("%s: the object %s%s is larger than any leaderrun writes: delete it", b.Where(), b.cfg.prefix, key)
	}
	return objlease.Object{Body: body, Version: aws.ToString(out.ETag), Date: date(out.ResultMetadata)}, nil
}

// Create writes with If-None-Match: *.
func (b *bucket) Create(ctx context.Context, key string, body []byte) (string, error) {
	return b.put(ctx, key, body, func(in *s3.PutObjectInput) { in.IfNoneMatch = aws.String("*") })
}

// Replace writes with If-Match: version.
func (b *bucket) Replace(ctx context.Context, key string, body []byte, version string) (string, error) {
	return b.put(ctx, key, body, func(in *s3.PutObjectInput) { in.IfMatch = aws.String(version) })
}

// Put writes unconditionally.
func (b *bucket) Put(ctx context.Context, key string, body []byte) error {
	_, err := b.put(ctx, key, body, func(*s3.PutObjectInput) {})
	return err
}

func (b *bucket) put(ctx context.Context, key string, body []byte, cond func(*s3.PutObjectInput)) (string, error) {
	in := &s3.PutObjectInput{Bucket: &b.cfg.bucket, Key: b.key(key), Body: bytes.NewReader(body),
		ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String("application/json")}
	cond(in)
	out, err := b.c.PutObject(ctx, in)
	if err != nil {
		return "", b.classify("write", key, err)
	}
	b.wrote(body, aws.ToString(out.ETag))
	return aws.ToString(out.ETag), nil
}

// Delete removes an object; S3 answers a missing one as deleted.
func (b *bucket) Delete(ctx context.Context, key string) error {
	_, err := b.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &b.cfg.bucket, Key: b.key(key)})
	if err != nil && !errors.Is(err, objlease.ErrNotFound) {
		if err = b.classify("delete", key, err); errors.Is(err, objlease.ErrNotFound) {
			return nil
		}
		return err
	}
	return nil
}

// List returns the keys under prefix, relative to the store's prefix.
func (b *bucket) List(ctx context.Context, prefix string) ([]string, error) {
	var keys []string
	p := s3.NewListObjectsV2Paginator(b.c, &s3.ListObjectsV2Input{Bucket: &b.cfg.bucket, Prefix: b.key(prefix)})
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, b.classify("list", prefix, err)
		}
		for _, o := range out.Contents {
			if k, ok := strings.CutPrefix(aws.ToString(o.Key), b.cfg.prefix); ok {
				keys = append(keys, k)
			}
		}
	}
	return keys, nil
}

// date is the Date of a response, zero when it has none.
func date(md smithymiddleware.Metadata) time.Time {
	if r, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response); ok {
		return httpDate(r.Header)
	}
	return time.Time{}
}

func errDate(err error) time.Time {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil {
		return httpDate(re.Response.Header)
	}
	return time.Time{}
}

func httpDate(h http.Header) time.Time {
	t, err := http.ParseTime(h.Get("Date"))
	if err != nil {
		return time.Time{}
	}
	return t
}

// classify turns an S3 client error into objlease's sentinels or one line
// of lease.ErrConfig or lease.ErrUnavailable; the S3 error stays inside.
func (b *bucket) classify(verb, key string, err error) error {
	what := fmt.Sprintf("%s: %s %s%s", b.Where(), verb, b.cfg.prefix, key)
	code, status := "", 0
	var ae smithy.APIError
	if errors.As(err, &ae) {
		code = ae.ErrorCode()
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	var se *v4.SigningError
	switch {
	case code == "PreconditionFailed" || status == http.StatusPreconditionFailed || code == "ConditionalRequestConflict":
		return fmt.Errorf("%s: %w", what, objlease.ErrConflict)
	case code == "NoSuchBucket":
		return storeerr.Config("%s: the bucket %s does not exist (leaderrun creates no bucket)", b.Where(), b.cfg.bucket)
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound:
		return fmt.Errorf("%s: %w", what, objlease.ErrNotFound)
	case errors.As(err, &se) && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled):
		return storeerr.New(what+": no AWS credentials found (set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, or run with an instance or pod role)", lease.ErrConfig, err)
	case status == http.StatusForbidden || status == http.StatusUnauthorized || authCode(code):
		return storeerr.New(fmt.Sprintf("%s: access denied (%s): check the credentials and that their policy allows s3:GetObject, s3:PutObject, s3:DeleteObject and s3:ListBucket on the prefix (docs/stores.md, section S3)", what, code), lease.ErrConfig, err)
	case status == http.StatusBadRequest || status == http.StatusMovedPermanently || code == "PermanentRedirect" || code == "AuthorizationHeaderMalformed":
		return storeerr.New(fmt.Sprintf("%s: the store refused the request (%s): check region= and endpoint=", what, orStatus(code, status)), lease.ErrConfig, err)
	case status == http.StatusNotImplemented:
		return storeerr.New(fmt.Sprintf("%s: the store does not implement a request leaderrun needs (%s)", what, orStatus(code, status)), lease.ErrConfig, err)
	}
	reason := orStatus(code, status)
	if reason == "" {
		reason = storeerr.NetReason(err)
	}
	switch {
	case reason != "":
	case errors.Is(err, context.DeadlineExceeded):
		reason = "no answer in time"
	case errors.Is(err, context.Canceled):
		reason = "cancelled"
	default:
		reason = "no answer"
	}
	return storeerr.New(fmt.Sprintf("%s: the store is unreachable or failed (%s)", what, reason), lease.ErrUnavailable, err)
}

func authCode(code string) bool {
	switch code {
	case "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken", "InvalidToken", "TokenRefreshRequired", "AllAccessDisabled", "AccountProblem":
		return true
	}
	return false
}

func orStatus(code string, status int) string {
	switch {
	case code != "":
		return code
	case status != 0:
		return fmt.Sprintf("HTTP %d", status)
	}
	return ""
}
