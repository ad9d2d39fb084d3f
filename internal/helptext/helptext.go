// Package helptext lays out leaderrun's help for the width it is read at:
// texts hand-wrapped in the source are reflowed, then wrapped once to the
// terminal's width.
package helptext

import (
	"io"
	"os"
	"strings"

	"golang.org/x/sys/unix"
)

// Width is the width help text wraps to: the terminal's, or
// DefaultWidth when the output is not a terminal.
func Width(w io.Writer) int {
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	return DefaultWidth
}

// DefaultWidth is the width of help written to a file or pipe.
const DefaultWidth = 80

// Reflow undoes the hand wrapping of a help text written in the source at
// 80 columns, so that Wrap wraps it once, to the width of the output:
// consecutive lines that start in the first column are one line, up to a
// line that ends a sentence or introduces something (".", ":"). Indented
// lines (examples, output formats) and blank lines are kept as they are.
func Reflow(s string) string {
	var b strings.Builder
	b.Grow(len(s)) // it never grows: every run builds its help texts
	open := false  // the last line written continues on the next
	for i, more := 0, true; more; i++ {
		var line string
		line, s, more = strings.Cut(s, "\n")
		prose := line != "" && line[0] != ' '
		switch {
		case i == 0:
		case open && prose:
			b.WriteByte(' ')
		default:
			b.WriteByte('\n')
		}
		b.WriteString(line)
		open = prose && !strings.HasSuffix(line, ".") && !strings.HasSuffix(line, ":")
	}
	return b.String()
}

// Wrap wraps each line of rendered help longer than width at spaces.
// Continuation lines are indented to the line's description column (the
// text after the first run of two or more spaces, as in a flag line, or
// after " - " in NAME, a line isNameLine accepts) when that column leaves room, else to the line's own
// indentation, and deeper for a line of an indented block (an output
// format) so that it does not read as the next line of the block; a comment
// of an example continues as a comment, and an example command with a
// backslash, so that both can still be pasted into a shell.
func Wrap(s string, width int, isNameLine func(string) bool) string {
	var b strings.Builder
	for i, line := range strings.Split(s, "\n") {
		if i > 0 {
			b.WriteByte('\n')
		}
		if len([]rune(line)) <= width {
			b.WriteString(line)
			continue
		}
		lead := len(line) - len(strings.TrimLeft(line, " "))
		text := line[lead:]
		head, pad, end := strings.Repeat(" ", lead), strings.Repeat(" ", lead), ""
		switch {
		case strings.HasPrefix(text, "# "):
			head, pad, text = head+"# ", pad+"# ", text[2:]
		case isNameLine(text):
			col := lead + strings.Index(text, " - ") + 3
			head, pad, text = line[:col], strings.Repeat(" ", col), line[col:]
		case strings.HasPrefix(text, "leaderrun "):
			pad, end = pad+"    ", " \\"
		case lead > 3 && !strings.Contains(text, "  "):
			pad += "    " // a line of an indented block
		default:
			if j := strings.Index(text, "  "); j >= 0 {
				col := lead + j + len(text[j:]) - len(strings.TrimLeft(text[j:], " "))
				if col <= width/2 {
					head, pad, text = line[:col], strings.Repeat(" ", col), line[col:]
				}
			}
		}
		cur := head
		n, fresh := len([]rune(cur)), true
		for _, w := range strings.Fields(text) {
			wl := len([]rune(w))
			if !fresh && n+1+wl+len(end) > width {
				b.WriteString(cur + end + "\n")
				cur, n, fresh = pad, len(pad), true
			}
			if !fresh {
				cur += " "
				n++
			}
			cur += w
			n += wl
			fresh = false
		}
		b.WriteString(cur)
	}
	return b.String()
}
