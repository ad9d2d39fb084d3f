package cmd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// How a value of a flag or of its variable is checked, and shown in a
// message: one line that says what was wrong and what would do.

// checkValue checks one value of a flag or variable and returns it in the
// form urfave parses. what names it in messages: "--ttl 5" or
// "LEADERRUN_TTL=5".
func checkValue(f flagInfo, what, v string, has bool) (string, error) {
	switch f.kind {
	case kindBool:
		if !has {
			return "true", nil
		}
		b, ok := parseBool(v)
		if !ok {
			return "", usagef("%s: want true or false (also yes/no, on/off, 1/0)", what)
		}
		return strconv.FormatBool(b), nil
	case kindDuration:
		if _, err := parseDuration(what, v, bareUnit(f.name)); err != nil {
			return "", err
		}
	case kindWait:
		switch t := strings.TrimSpace(v); {
		case t == "":
			return "", usagef("%s: want a duration such as 30s or 10m, 0 to try once, or forever", what)
		case t != "0" && t != "-1" && isBareNumber(t):
			return "", usagef("%s: did you mean %ss?", what, t)
		}
	case kindInt:
		if _, err := strconv.Atoi(strings.TrimSpace(v)); err != nil {
			return "", usagef("%s: want a whole number", what)
		}
		return strings.TrimSpace(v), nil
	case kindString:
		if v == "" {
			return "", usagef("%s: empty value; give a value or leave %s out", what, strings.Fields(what)[0])
		}
	}
	return v, nil
}

// parseBool reads a boolean as systemd units and shells write it.
func parseBool(s string) (value, ok bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "1", "true", "yes", "on", "y", "t":
		return true, true
	case "0", "false", "no", "off", "n", "f":
		return false, true
	}
	return false, false
}

// parseDuration is time.ParseDuration with a message that names the flag or
// variable and suggests what was likely meant: the unit a bare number lacks
// (unit), and hours for days, which Go's durations do not have.
func parseDuration(what, s, unit string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	d, err := time.ParseDuration(t)
	if err == nil {
		return d, nil
	}
	if isBareNumber(t) {
		return 0, usagef("%s: did you mean %s%s?", what, t, unit)
	}
	if n, ok := strings.CutSuffix(t, "d"); ok && isBareNumber(n) {
		if days, err := strconv.ParseFloat(n, 64); err == nil && days > 0 && days <= 10000 {
			return 0, usagef("%s: durations have no days; did you mean %s?", what, strconv.FormatFloat(days*24, 'f', -1, 64)+"h")
		}
	}
	return 0, usagef("%s: want a duration such as 500ms, 15s or 10m", what)
}

// bareUnit is the unit a bare number given to the duration flag called
// name most likely lacks: hours for the windows into the past of history
// and check (a job's "ran within 25" is a day and an hour), seconds for
// the rest (TTLs, intervals, timeouts).
func bareUnit(name string) string {
	switch name {
	case "ran-within", "since":
		return "h"
	}
	return "s"
}

func isBareNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil && !strings.ContainsAny(s, "eEnNxX") // not 1e3, NaN, Inf, 0x10
}

// shellQuote shows a value as it would have to be typed.
func shellQuote(s string) string {
	if s == "" || strings.ContainsAny(s, " \t\n'\"\\$`") {
		return strconv.Quote(s)
	}
	return s
}

// zoneDir is where time.LoadLocation finds zones on Debian and most Linux
// systems.
var zoneDir = "/usr/share/zoneinfo"

// zoneCase returns the zone name that differs from zone only in case
// (europe/berlin: Europe/Berlin), or "". It reads one directory a level.
func zoneCase(zone string) string {
	dir, parts := zoneDir, strings.Split(zone, "/")
	for i, p := range parts {
		if p == "" || p == "." || p == ".." {
			return ""
		}
		entries, err := os.ReadDir(dir)
		if err != nil {
			return ""
		}
		found := ""
		for _, e := range entries {
			if strings.EqualFold(e.Name(), p) && e.IsDir() == (i < len(parts)-1) {
				found = e.Name()
				break
			}
		}
		if found == "" {
			return ""
		}
		parts[i], dir = found, filepath.Join(dir, found)
	}
	return strings.Join(parts, "/")
}
