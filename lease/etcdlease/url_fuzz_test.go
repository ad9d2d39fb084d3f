package etcdlease

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// FuzzParseURL feeds parseURL a URL with a password in a credential
// position (":PASSWORD@") amid arbitrary text. It must never panic, every
// error must wrap lease.ErrConfig, and no error, no display string may
// contain the password. The environment's password (ETCDCTL_USER,
// ETCDCTL_PASSWORD) is checked the same way.
func FuzzParseURL(f *testing.F) {
	for _, s := range [][3]string{
		{"etcd://u", "S3cr3tPassw0rd", "127.0.0.1:2379"},
		{"etcd:/u", "S3cr3tPassw0rd", "127.0.0.1:2379"},
		{"etcd::/", "S3cr3tPassw0rd", "h"},
		{"etcd", "S3cr3tPassw0rd", "h"},
		{"etcd//u", "S3cr3tPassw0rd", "h"},
		{"etcds://u", "S3cr3tPassw0rd", "h:2379?servername=x"},
		{"etcd://u", "S3cr3tPassw0rd", "a:1,b:2,c:3/jobs/prod"},
		{"etcd://u", "S3cr3tPassw0rd", "h:99999"},
		{"etcd://u", "S3cr3tPassw0rd", "h/x?S3cr3t=1"},
		{"etcd://h/u", "S3cr3tPassw0rd", "x"},
		{"ETCDS://u", "S3cr3tPassw0rd", "h/0"},
	} {
		f.Add(s[0], s[1], s[2], "")
	}
	f.Add("etcd://", "S3cr3tPassw0rd", "h:2379", "Env0Passw0rdX")
	f.Fuzz(func(t *testing.T, before, pass, after, envPass string) {
		if !leasetest.SecretLike(pass) || strings.Contains(before, pass) || strings.Contains(after, pass) {
			return
		}
		getenv := func(k string) string {
			switch k {
			case EnvUser:
				return "envuser:" + envPass
			case EnvPassword:
				return envPass
			}
			return ""
		}
		raw := before + ":" + pass + "@" + after
		c, err := parseURL(raw, getenv)
		out := ""
		if err != nil {
			if !errors.Is(err, lease.ErrConfig) {
				t.Fatalf("parseURL(%q) error %v does not wrap lease.ErrConfig", raw, err)
			}
			out = err.Error()
		} else {
			out = c.display + " " + c.where
			if c.pass != "" && !slices.Contains(c.secrets, c.pass) {
				t.Fatalf("parseURL(%q): password %q missing from secrets", raw, c.pass)
			}
		}
		// Another part of the output might spell the string by chance: the
		// same URL with another password of the same shape tells.
		leasetest.NoSecret(t, fmt.Sprintf("parseURL(%q)", raw), out, pass, func(p string) string {
			return parseOutput(before+":"+p+"@"+after, getenv)
		})
		if leasetest.SecretLike(envPass) && strings.Contains(out, envPass) && !strings.Contains(raw, envPass) {
			t.Fatalf("parseURL(%q): output %q contains the environment password", raw, out)
		}
	})
}

// parseOutput is what parseURL shows of raw: its error or its display form.
func parseOutput(raw string, getenv func(string) string) string {
	c, err := parseURL(raw, getenv)
	if err != nil {
		return err.Error()
	}
	return c.display + " " + c.where
}
