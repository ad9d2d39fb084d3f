package cmd

import (
	"errors"
	"unicode"
	"unicode/utf8"
)

// checkPrintable refuses text that a terminal could interpret: control
// characters (escape sequences start with one) and invalid UTF-8. Labels
// such as --holder end up in other users' status output and log lines.
func checkPrintable(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return errors.New("contains a control character; use printable text")
		}
	}
	return nil
}
