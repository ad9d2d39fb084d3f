// Package plainhost tells a host in a URL (NAME, NAME:PORT, [IPv6],
// [IPv6]:PORT) from text that may be a password typed in the wrong place,
// so that a message may show the one and must hide the other. The command
// line's URL redaction and pglease's URL check share it; it imports nothing
// but strings and strconv, so the base program may link it.
package plainhost

import (
	"strconv"
	"strings"
)

// Split checks h as NAME, NAME:PORT, [IPv6] or [IPv6]:PORT, where NAME is
// letters, digits, '.', '-' and '_' (possibly none) and PORT is digits
// (possibly none). ok is false for anything else, which may be a password;
// otherwise port is what follows the ':', if hasPort.
func Split(h string) (port string, hasPort, ok bool) {
	if strings.HasPrefix(h, "[") {
		end := strings.Index(h, "]")
		if end < 0 || strings.Trim(h[1:end], "0123456789abcdefABCDEF:.") != "" {
			return "", false, false
		}
		h = "x" + h[end+1:]
	}
	name, port, hasPort := strings.Cut(h, ":")
	if strings.Trim(port, "0123456789") != "" {
		return "", false, false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') {
			return "", false, false
		}
	}
	return port, hasPort, true
}

// Port reports whether p is a TCP port number from 1 to 65535 in digits.
func Port(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n >= 1 && n <= 65535 && strings.Trim(p, "0123456789") == ""
}
