package objlease

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// ProbeFor is how long a passed probe is trusted (Probe's cache).
const ProbeFor = 24 * time.Hour

// ErrIgnoresConditions is what Probe's refusal wraps (with lease.ErrConfig).
var ErrIgnoresConditions = errors.New("the store ignores conditional writes")

// Probe checks that b honours conditional writes, on an object of its own
// (probe@ID, deleted again): a create must succeed, a second create of the
// same key must fail, a replace on a wrong version must fail, and a
// replace on the version the first create made must succeed. A store that
// accepts the headers and ignores them would give two holders, so one
// that fails is refused with one line naming it (lease.ErrConfig and
// ErrIgnoresConditions). Other failures (the store unreachable, access
// denied) are returned as the Bucket wrote them.
//
// With cacheDir not empty, a pass is remembered there for ProbeFor, per
// b.Where(), and Probe then writes nothing; a refusal is never remembered.
// A Bucket that is a ProbeNoter has its note remembered with the pass.
func Probe(ctx context.Context, b Bucket, cacheDir string) error {
	mark := ""
	noter, _ := b.(ProbeNoter)
	if cacheDir != "" {
		sum := sha256.Sum256([]byte(b.Where()))
		mark = filepath.Join(cacheDir, hex.EncodeToString(sum[:16]))
		if note, ok := passedRecently(mark); ok {
			if noter != nil {
				noter.UseProbeNote(note)
			}
			return nil
		}
	}
	if err := probe(ctx, b); err != nil {
		return err
	}
	if mark != "" {
		note := "-"
		if noter != nil {
			note = noter.ProbeNote()
		}
		// Best effort: without a cache, the next start probes again.
		if os.MkdirAll(cacheDir, 0o700) == nil {
			_ = os.WriteFile(mark, []byte(strconv.FormatInt(time.Now().Unix(), 10)+" "+note+" "+b.Where()+"\n"), 0o600)
		}
	}
	return nil
}

// ProbeCacheDir is where a store program remembers Probe's passes:
// leaderrun's directory in the user's cache directory (XDG_CACHE_HOME, or
// ~/.cache), under name; "" when there is none. getenv reads the
// environment.
func ProbeCacheDir(getenv func(string) string, name string) string {
	dir := getenv("XDG_CACHE_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home := getenv("HOME")
		if home == "" || !filepath.IsAbs(home) {
			return ""
		}
		dir = filepath.Join(home, ".cache")
	}
	return filepath.Join(dir, "leaderrun", name)
}

// ProbeNoter is a Bucket that learns something of its store from the
// probe's writes (s3lease: whether its ETags are the MD5 of the content),
// which Probe remembers with a pass and hands back when it uses the pass.
type ProbeNoter interface {
	// ProbeNote is what the probe's writes taught: one word.
	ProbeNote() string
	// UseProbeNote is given the note remembered with a pass.
	UseProbeNote(note string)
}

// passedRecently reads a cached pass: the Unix time of the probe, within
// ProbeFor of now (and not in the future), and its note.
func passedRecently(mark string) (string, bool) {
	f, err := os.Open(mark)
	if err != nil {
		return "", false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	var buf [256]byte
	n, _ := f.Read(buf[:])
	fields := strings.Fields(string(buf[:n]))
	if len(fields) < 2 {
		return "", false
	}
	t, err := strconv.ParseInt(fields[0], 10, 64)
	if err != nil {
		return "", false
	}
	age := time.Since(time.Unix(t, 0))
	return fields[1], age >= -time.Minute && age < ProbeFor
}

func probe(ctx context.Context, b Bucket) error {
	key := "probe@" + lease.NewID()
	v1, err := b.Create(ctx, key, []byte("leaderrun probe 1 "+newWrite()))
	if err != nil {
		return err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = b.Delete(dctx, key)
	}()
	words := ProbeWords(s3Words{})
	if w, ok := b.(ProbeWords); ok {
		words = w
	}
	create, replace, instead := words.Conditions()
	refuse := func(what string) error {
		return lease.NewError(fmt.Sprintf("%s %s, so it does not honour conditional writes and two holders could take one lease: leaderrun refuses it (%s)", b.Where(), what, instead), lease.ErrConfig, ErrIgnoresConditions)
	}
	_, err = b.Create(ctx, key, []byte("leaderrun probe 2 "+newWrite()))
	switch {
	case err == nil:
		return refuse("accepted a second create of an object with " + create)
	case !errors.Is(err, ErrConflict):
		return err
	}
	_, err = b.Replace(ctx, key, []byte("leaderrun probe 3 "+newWrite()), words.WrongVersion(v1))
	switch {
	case err == nil:
		return refuse("accepted a write with " + replace + " of a version the object does not have")
	case !errors.Is(err, ErrConflict):
		return err
	}
	if _, err = b.Replace(ctx, key, []byte("leaderrun probe 4 "+newWrite()), v1); errors.Is(err, ErrConflict) || errors.Is(err, ErrNotFound) {
		return refuse("refused a write with " + replace + " of the version it had just given the object (its versions are not stable)")
	}
	return err
}

// ProbeWords is a Bucket whose conditions are not S3's headers (GCS's
// generation preconditions): the probe names them in its refusal, and
// asks it for a version that an object does not have.
type ProbeWords interface {
	// Conditions names the create's and the replace's conditions as the
	// store's users know them ("ifGenerationMatch=0"), and says what to
	// use instead of a store that ignores them.
	Conditions() (create, replace, instead string)
	// WrongVersion returns a well-formed version other than v.
	WrongVersion(v string) string
}

// s3Words are S3's: ETags, and the If-None-Match and If-Match headers.
type s3Words struct{}

func (s3Words) Conditions() (string, string, string) {
	return "If-None-Match: *", "If-Match", "use a store that does: AWS S3, or a gateway that implements If-None-Match and If-Match on PutObject"
}

// WrongVersion is an ETag no content of leaderrun's has (an MD5 of zeros).
func (s3Words) WrongVersion(string) string { return `"00000000000000000000000000000000"` }
