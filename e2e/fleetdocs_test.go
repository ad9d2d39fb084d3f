package e2e

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

var (
	// fleetWordsRE finds a promise about more than one host.
	fleetWordsRE = regexp.MustCompile(`(?i)\b(every host|each host|all hosts|many hosts|several hosts|other hosts|ten hosts|across hosts|the fleet|a fleet|fleet-wide|on any host|whole fleet)\b`)
	// runCmdRE finds a leaderrun run command: leaderrun, its flags, and
	// the -- before COMMAND.
	runCmdRE = regexp.MustCompile("leaderrun(?:[ \t]+(?:-[^` \t\n]*|[^-` \t\n][^` \t\n]*))*?[ \t]+--[ \t]+[^` \t\n]")
	// networkStoreRE is a store every host can reach: a --store URL of a
	// network scheme, or the store given by its variable.
	networkStoreRE = regexp.MustCompile(`--store[ =]+["']?[a-z0-9+]+://|LEADERRUN_STORE=`)
	// fileStoreRE is a --store URL of the file store.
	fileStoreRE = regexp.MustCompile(`--store[ =]+["']?file://`)
)

// TestFleetExamplesNameANetworkStore: an example whose text promises
// behaviour across hosts (the fleet, every host) must run leaderrun on a
// store those hosts share. The default store is a file on each host, so
// such an example without --store runs the job once per host, not once in
// the fleet.
func TestFleetExamplesNameANetworkStore(t *testing.T) {
	t.Parallel()
	for _, f := range docFiles(t) {
		text, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range mdChunks(string(text)) {
			if u.output || !fleetWordsRE.MatchString(u.context) {
				continue
			}
			for _, cmd := range runCmdRE.FindAllString(u.body, -1) {
				if !networkStoreRE.MatchString(cmd) || fileStoreRE.MatchString(cmd) {
					if !networkStoreRE.MatchString(u.body) || fileStoreRE.MatchString(u.body) {
						t.Errorf("%s:%d: %q promises more than one host (%q) but runs on the default, per-host file store: name a network --store", f, u.line, cmd, fleetWordsRE.FindString(u.context))
					}
				}
			}
		}
	}
}

// mdChunk is a paragraph, or a fenced block with the paragraph before it
// as its context.
type mdChunk struct {
	line    int    // 1-based line where the unit starts
	body    string // the text whose commands are checked
	context string // the text whose words say what is promised
	output  bool   // a fenced block of output or a synopsis (readmeOutputInfos)
}

// mdChunks splits a Markdown text into paragraphs and fenced blocks; a
// block's context is itself and the paragraph right before it, and a
// paragraph's is itself.
func mdChunks(text string) []mdChunk {
	var units []mdChunk
	var cur []string
	start, prev := 0, ""
	inFence := false
	flush := func(fence bool) {
		if len(cur) == 0 {
			return
		}
		body := strings.Join(cur, "\n")
		ctx := body
		if fence {
			ctx = prev + "\n" + body
		}
		info := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(cur[0]), "```"))
		units = append(units, mdChunk{line: start + 1, body: body, context: ctx, output: fence && slices.Contains(readmeOutputInfos, info)})
		if !fence {
			prev = body
		}
		cur = nil
	}
	for i, l := range strings.Split(text, "\n") {
		switch {
		case strings.HasPrefix(strings.TrimSpace(l), "```"):
			if inFence {
				cur = append(cur, l)
				flush(true)
				inFence = false
				continue
			}
			flush(false)
			inFence, start = true, i
			cur = append(cur, l)
		case inFence:
			cur = append(cur, l)
		case strings.TrimSpace(l) == "":
			flush(false)
		default:
			if len(cur) == 0 {
				start = i
			}
			cur = append(cur, l)
		}
	}
	flush(inFence)
	return units
}
