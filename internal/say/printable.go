// Package say is how leaderrun words what it shows people, shared by the
// run (internal/run) and the read-only commands (cmd): times, durations,
// holders, and text read from a store made safe for a terminal.
package say

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// CheckPrintable refuses text that a terminal could interpret or that
// would reorder or break the line it is printed in: control characters
// (escape sequences start with one), bidi controls such as U+202E, the
// line and paragraph separators U+2028 and U+2029, and invalid UTF-8.
// Labels such as --holder end up in other users' status output and log
// lines; Printable escapes the same characters in what is read back.
func CheckPrintable(s string) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	for _, r := range s {
		switch {
		case unicode.IsControl(r):
			return errors.New("contains a control character; use printable text")
		case reorders(r):
			return fmt.Errorf("contains U+%04X, which reorders or breaks the text around it; use printable text", r)
		}
	}
	return nil
}

// Printable returns s with what a terminal could interpret escaped: each
// control character and each byte of invalid UTF-8 as \xNN (a backslash
// itself as \\, so the escaping cannot be forged), and the characters that
// reorder or break the text around them (bidi controls such as U+202E, the
// line and paragraph separators U+2028 and U+2029) as \uNNNN. Text read back from a
// store (holder labels in lock files, candidate records written by other
// users, Redis records, etcd keys) goes through it before it is printed,
// whatever CheckPrintable let in when it was written.
func Printable(s string) string {
	clean := utf8.ValidString(s)
	for _, r := range s {
		if unicode.IsControl(r) || r == '\\' || reorders(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\\':
			b.WriteString(`\\`)
		case unicode.IsControl(r) || reorders(r):
			if r < 0x100 {
				fmt.Fprintf(&b, `\x%02x`, r)
			} else {
				fmt.Fprintf(&b, `\u%04x`, r)
			}
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// reorders reports whether r changes how the text around it is laid out:
// a bidi control (U+202E turns what follows around) or a line or paragraph
// separator.
func reorders(r rune) bool {
	return unicode.Is(unicode.Bidi_Control, r) || r == '\u2028' || r == '\u2029'
}

// unknownHolder names a holder whose record says nothing of it: a lock
// without leaderrun's record (flock(1) on a shared lock file, a key another
// program wrote, a holder about to write its record).
const unknownHolder = "an unknown process (no leaderrun record)"

// HolderName is a holder label as every command prints it: escaped by
// Printable, or unknownHolder when there is none.
func HolderName(label string) string {
	if label == "" {
		return unknownHolder
	}
	return Printable(label)
}
