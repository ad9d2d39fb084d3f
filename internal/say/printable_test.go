package say

import (
	"testing"
)

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		"host-a:123":          "host-a:123",
		"é ü 漢":               "é ü 漢",
		"evil\x1b[2Jhost":     `evil\x1b[2Jhost`,
		"bell\a":              `bell\x07`,
		"del\x7f":             `del\x7f`,
		"c1\u009bcsi":         `c1\x9bcsi`,
		"bad\xffutf8":         `bad\xffutf8`,
		`back\slash`:          `back\\slash`,
		"nl\nand\rcr":         `nl\x0aand\x0dcr`,
		"line\u2028separator": `line\u2028separator`,
		"para\u2029graph":     `para\u2029graph`,
		"bidi\u202eevil":      `bidi\u202eevil`,
		"isolate\u2066x":      `isolate\u2066x`,
	} {
		if got := Printable(in); got != want {
			t.Errorf("Printable(%q) = %q; want %q", in, got, want)
		}
	}
}

// TestCheckPrintable: what Printable would have to escape is refused when
// it is given (a --holder with U+202E printed its own "acquired" line
// reversed), and ordinary text in any script is not.
func TestCheckPrintable(t *testing.T) {
	for _, bad := range []string{"a\x1b[2Jb", "a\u202eb", "a\u2028b", "a\u2029b", "a\u200fb", "\xff"} {
		if CheckPrintable(bad) == nil {
			t.Errorf("CheckPrintable(%q) accepted it", bad)
		}
	}
	for _, good := range []string{"web-1", "host:42", "Zürich", "東京", "مرحبا"} {
		if err := CheckPrintable(good); err != nil {
			t.Errorf("CheckPrintable(%q) = %v", good, err)
		}
	}
}
