package cmd

import (
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
		if _, err := parseDuration(what, v); err != nil {
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
// variable and suggests the unit a bare number lacks.
func parseDuration(what, s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err == nil {
		return d, nil
	}
	if t := strings.TrimSpace(s); isBareNumber(t) {
		return 0, usagef("%s: did you mean %ss?", what, t)
	}
	return 0, usagef("%s: want a duration such as 500ms, 15s or 10m", what)
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
