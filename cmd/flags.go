package cmd

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/lease"
)

// This file is what leaderrun adds to urfave/cli v2's flag parsing, and
// only what urfave cannot do (urfave still parses every flag, runs the
// commands and writes help):
//
//   - Variables from Main's environment. urfave reads a flag's EnvVars from
//     the process environment itself, before the command line, and with
//     strconv.ParseBool and time.ParseDuration's messages. takeEnv hides
//     the EnvVars from it; applyEnv reads them through env.getenv after the
//     command line, so that a flag on the command line always wins, also
//     over the variable of a related flag (--wait beats LEADERRUN_NO_WAIT),
//     and refuses related flags that contradict each other at the same
//     level (-n --wait 2s, -q -v). The same flag twice takes the last value.
//   - Flags anywhere. urfave stops at the first positional argument and
//     gives a flag written before a subcommand to the app, not to the
//     subcommand. preparse moves the flags of status, watch, history and
//     check (before or after the subcommand, before or after NAME) behind
//     the subcommand, so a flag means the same wherever it is written.
//   - One-line refusals that help. urfave's "flag provided but not defined"
//     comes with the whole help; its suggester (Jaro-Winkler) always names
//     some flag, however far, and misses short typos such as --tl. preparse
//     refuses an unknown flag, a bare number given as a duration (with the
//     unit suggested) and an explicitly empty value, in one line, and
//     editDistance (optimal string alignment, ≤ a third of the name) is also
//     what misspeltVars uses for LEADERRUN_* variables.
//   - Help that shows each flag's variable although takeEnv hid it
//     (flagString), and --version without the -v that is --verbose here
//     (app.go's init: urfave v2 has these only as package variables).

// Floors below which a value is refused.
const (
	// MinWatchInterval is the shortest watch --interval: polling more than a
	// hundred times a second only loads the store, and a store call under
	// 10ms is already at the mercy of scheduling delays.
	MinWatchInterval = 10 * time.Millisecond
)

// flagKind is how a flag's value is checked.
type flagKind int

const (
	kindBool flagKind = iota
	kindString
	kindDuration
	kindWait // a duration, 0 or forever
	kindInt
)

// flagInfo is what preparse knows of one flag.
type flagInfo struct {
	name string // canonical long name
	kind flagKind
}

// scope is the flags one form of the command line accepts.
type scope struct {
	name  string // "" for the run form, else the subcommand
	flags map[string]flagInfo
}

func newScope(name string, flags []cli.Flag) scope {
	s := scope{name: name, flags: map[string]flagInfo{}}
	for _, f := range flags {
		names := f.Names()
		info := flagInfo{name: names[0], kind: kindOf(f)}
		for _, n := range names {
			s.flags[n] = info
		}
	}
	return s
}

func kindOf(f cli.Flag) flagKind {
	switch f.(type) {
	case *cli.BoolFlag:
		return kindBool
	case *cli.DurationFlag:
		return kindDuration
	case *cli.IntFlag:
		return kindInt
	}
	if f.Names()[0] == "wait" {
		return kindWait
	}
	return kindString
}

// describe says which form a scope is, for messages.
func (s scope) describe() string {
	if s.name == "" {
		return "the run form (leaderrun [flags] -- COMMAND)"
	}
	return s.name
}

// dashes writes a flag name as the user would: -n, --ttl.
func dashes(name string) string {
	if len(name) == 1 {
		return "-" + name
	}
	return "--" + name
}

// parsed is the command line after preparse.
type parsed struct {
	args    []string // what urfave parses (without the program name)
	command []string // the run form's COMMAND [ARGS...]
}

// preparse checks the flags in args (the command line without the program
// name and without "--" and what follows it) against scopes (the run form
// first) and returns them normalised for urfave: every flag as --name=value,
// a subcommand's flags right after it, and the run form's command apart.
// hasDash says "--" followed, after which dashed is the command.
func preparse(args []string, hasDash bool, dashed []string, scopes []scope) (parsed, error) {
	p := preparser{args: args, scopes: scopes, union: scope{flags: map[string]flagInfo{}}}
	for _, s := range scopes {
		for n, f := range s.flags {
			p.union.flags[n] = f
		}
	}
	// Flags before the first word belong to the form that word chooses.
	var before []given
	i := 0
	for i < len(args) && isFlag(args[i]) {
		gs, j, err := p.next(i, p.union)
		if err != nil {
			return parsed{}, err
		}
		before, i = append(before, gs...), j
	}
	sub, target := "", scopes[0]
	if i < len(args) {
		switch args[i] {
		case "status", "watch", "history", "check", "help":
			sub = args[i]
			for _, s := range scopes {
				if s.name == sub {
					target = s
				}
			}
		}
	}
	switch sub {
	case "":
		return p.runForm(before, args[i:], hasDash, dashed)
	case "help":
		flags, err := p.norm(before, target)
		if err != nil {
			return parsed{}, err
		}
		return parsed{args: append(append(flags, "help"), args[i+1:]...)}, nil
	}
	return p.nameForm(sub, target, before, i+1, hasDash)
}

// preparser holds what preparse's steps share.
type preparser struct {
	args   []string
	scopes []scope
	union  scope // every form's flags
}

// given is one flag as written on the command line.
type given struct {
	info  flagInfo
	token string // the flag's name as written (-n, --no-wait), for messages
	value string
	has   bool
}

func isFlag(a string) bool { return len(a) > 1 && a[0] == '-' }

// next reads the flag at args[i], which within must know, and returns it
// with the index after the flag and its value. Short boolean flags may be
// combined, as getopt allows: -nq is -n -q (one given each).
func (p preparser) next(i int, within scope) ([]given, int, error) {
	a := p.args[i]
	name, value, has := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
	info, ok := within.flags[name]
	if !ok && !has && a[1] != '-' && len(name) > 1 {
		var gs []given
		for _, r := range name {
			if f, ok := p.union.flags[string(r)]; ok && f.kind == kindBool { // norm says whose a flag of another form is
				gs = append(gs, given{info: f, token: "-" + string(r)})
			}
		}
		if len(gs) == len(name) {
			return gs, i + 1, nil
		}
	}
	if !ok {
		// Only the name: the value may be a password (--stor=redis://:pw@h).
		token, _, _ := strings.Cut(a, "=")
		return nil, i, unknownFlag(token, name, within, p.scopes)
	}
	g := given{info: info, token: dashes(name), value: value, has: has}
	if info.kind != kindBool && !has {
		if i+1 >= len(p.args) {
			return nil, i, usagef("%s needs a value", g.token)
		}
		i++
		g.value, g.has = p.args[i], true
	}
	return []given{g}, i + 1, nil
}

// norm checks that s takes each of gs and that its value is valid, and
// writes them as urfave parses them.
func (p preparser) norm(gs []given, s scope) ([]string, error) {
	var out []string
	for _, g := range gs {
		if _, ok := s.flags[g.info.name]; !ok {
			return nil, usagef("%s does not take %s; it is a flag of %s", s.describe(), g.token, ownerOf(g.info.name, p.scopes))
		}
		v, err := checkValue(g.info, g.token+" "+shellQuote(g.value), g.value, g.has)
		if err != nil {
			return nil, err
		}
		if g.has || g.info.kind != kindBool {
			out = append(out, "--"+g.info.name+"="+v)
		} else {
			out = append(out, "--"+g.info.name)
		}
	}
	return out, nil
}

// runForm finishes the run form: flags, then the command, either after
// "--" (dashed) or as the first word that is not a flag (rest).
func (p preparser) runForm(flags []given, rest []string, hasDash bool, dashed []string) (parsed, error) {
	norm, err := p.norm(flags, p.scopes[0])
	if err != nil {
		return parsed{}, err
	}
	out := parsed{args: norm, command: dashed}
	if len(rest) > 0 {
		if hasDash {
			return parsed{}, usagef("unexpected %q before --; put flags before -- and the command after it", rest[0])
		}
		out.command = rest
	}
	return out, nil
}

// nameForm finishes a subcommand that takes a lease NAME: its flags may
// come before it (before) and anywhere after it, from args[i] on, NAME
// among them; urfave gets them all right after the subcommand, and NAME
// after "--". hasDash (a command after "--") is refused once the flags are
// checked.
func (p preparser) nameForm(sub string, target scope, before []given, i int, hasDash bool) (parsed, error) {
	var after []given
	var positional []string
	for i < len(p.args) {
		if !isFlag(p.args[i]) {
			positional = append(positional, p.args[i])
			i++
			continue
		}
		gs, j, err := p.next(i, target)
		if err != nil {
			return parsed{}, err
		}
		after, i = append(after, gs...), j
	}
	all := append(before, after...)
	flags, err := p.norm(all, target)
	if err != nil {
		return parsed{}, err
	}
	if hasDash {
		return parsed{}, usagef("%s takes a lease NAME, not a command after --", sub)
	}
	out := append([]string{sub}, flags...)
	for _, g := range all {
		if b, _ := parseBool(g.value); g.info.name == "help" && (!g.has || b) {
			positional = nil // urfave would take NAME for a help topic
		}
	}
	if len(positional) > 0 {
		out = append(append(out, "--"), positional...)
	}
	return parsed{args: out}, nil
}

// ownerOf names the form(s) that do take flag name, for messages.
func ownerOf(name string, scopes []scope) string {
	var owners []string
	for _, s := range scopes {
		if _, ok := s.flags[name]; ok {
			owners = append(owners, s.describe())
		}
	}
	return strings.Join(owners, " and ")
}

// unknownFlag refuses a flag no scope knows, suggesting the nearest one.
func unknownFlag(token, name string, within scope, scopes []scope) error {
	for _, s := range scopes {
		if _, ok := s.flags[name]; ok {
			return usagef("%s does not take %s; it is a flag of %s", within.describe(), dashes(name), ownerOf(name, scopes))
		}
	}
	best, bestD := "", 3
	for n := range within.flags {
		if len(n) == 1 {
			continue
		}
		if d := editDistance(strings.ToLower(name), n); d < bestD || d == bestD && n < best {
			best, bestD = n, d
		}
	}
	if best != "" && bestD <= max(1, len(name)/3) {
		return usagef("unknown flag %s; did you mean --%s?", token, best)
	}
	return usagef("unknown flag %s", token)
}

// editDistance is the optimal-string-alignment distance (Levenshtein plus
// transpositions) between a and b.
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			d[i][j] = min(d[i-1][j]+1, d[i][j-1]+1, d[i-1][j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
}

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

// flagVars maps each flag's name to its variable (LEADERRUN_TTL for ttl),
// read once from the flag definitions, where EnvVars declares it. It never
// changes.
var flagVars = varsOf(slices.Concat(runFlags(), statusFlags(), watchFlags(), historyFlags(), checkFlags()))

// envVars returns a pointer to f's EnvVars, or nil for a flag type without.
func envVars(f cli.Flag) *[]string {
	switch f := f.(type) {
	case *cli.BoolFlag:
		return &f.EnvVars
	case *cli.StringFlag:
		return &f.EnvVars
	case *cli.DurationFlag:
		return &f.EnvVars
	case *cli.IntFlag:
		return &f.EnvVars
	case *cli.StringSliceFlag:
		return &f.EnvVars // the variable's value is comma-separated, as urfave's
	}
	return nil
}

// varsOf maps the name of each of flags to the first of its EnvVars.
func varsOf(flags []cli.Flag) map[string]string {
	m := map[string]string{}
	for _, f := range flags {
		if v := envVars(f); v != nil && len(*v) > 0 {
			m[f.Names()[0]] = (*v)[0]
		}
	}
	return m
}

// takeEnv clears the EnvVars of flags, so that urfave does not read the
// process environment; applyEnv reads the variables (flagVars) instead.
func takeEnv(flags []cli.Flag) []cli.Flag {
	for _, f := range flags {
		if v := envVars(f); v != nil {
			*v = nil
		}
	}
	return flags
}

// restoreEnv undoes takeEnv, for documentation.
func restoreEnv(flags []cli.Flag) {
	for _, f := range flags {
		if v, env := envVars(f), envOf(f.Names()[0]); v != nil && env != "" {
			*v = []string{env}
		}
	}
}

// envOf returns the variable of the flag called name, or "".
func envOf(name string) string { return flagVars[name] }

// relatedFlags are flags that say the same thing: a command-line flag of a
// group silences the variables of the whole group.
var relatedFlags = [][]string{{"wait", "no-wait"}, {"quiet", "verbose"}}

// applyEnv sets each of flags that was not given on the command line from
// its variable, then refuses contradictions within a group of related flags.
func applyEnv(c *cli.Context, flags []cli.Flag, getenv func(string) string) error {
	onLine := map[string]bool{}
	for _, f := range flags {
		onLine[f.Names()[0]] = c.IsSet(f.Names()[0])
	}
	silenced := func(name string) bool {
		for _, g := range relatedFlags {
			if slices.Contains(g, name) {
				for _, other := range g {
					if onLine[other] {
						return true
					}
				}
			}
		}
		return onLine[name]
	}
	fromEnv := map[string]bool{}
	for _, f := range flags {
		name := f.Names()[0]
		env := envOf(name)
		if env == "" || silenced(name) {
			continue
		}
		raw := getenv(env)
		if strings.TrimSpace(raw) == "" {
			continue // an empty variable is an unset one
		}
		what := env + "=" + shellQuote(raw) + " (" + dashes(name) + ")"
		if kindOf(f) == kindString {
			what = env + " (" + dashes(name) + ")" // may hold a password (LEADERRUN_STORE)
		}
		v, err := checkValue(flagInfo{name: name, kind: kindOf(f)}, what, raw, true)
		if err != nil {
			return err
		}
		if err := c.Set(name, v); err != nil {
			return usagef("%s: %v", what, err)
		}
		fromEnv[name] = true
	}
	return contradictions(c, flags, onLine, fromEnv, getenv)
}

// contradictions refuses related flags that contradict each other at one
// level: both on the command line (onLine), or both from variables
// (fromEnv).
func contradictions(c *cli.Context, flags []cli.Flag, onLine, fromEnv map[string]bool, getenv func(string) string) error {
	spell := func(name string) string {
		switch {
		case fromEnv[name]:
			return envOf(name) + "=" + shellQuote(getenv(envOf(name)))
		case kindOfName(flags, name) == kindBool:
			return dashes(name)
		default:
			return dashes(name) + " " + shellQuote(c.String(name))
		}
	}
	has := func(name string) bool { return onLine[name] || fromEnv[name] }
	if has("no-wait") && has("wait") && c.Bool("no-wait") && waitNonZero(c.String("wait")) {
		return usagef("%s and %s contradict each other; give one of them", spell("no-wait"), spell("wait"))
	}
	if has("quiet") && has("verbose") && c.Bool("quiet") && c.Bool("verbose") {
		return usagef("%s and %s contradict each other; give one of them", spell("quiet"), spell("verbose"))
	}
	return nil
}

func kindOfName(flags []cli.Flag, name string) flagKind {
	for _, f := range flags {
		if f.Names()[0] == name {
			return kindOf(f)
		}
	}
	return kindString
}

// waitNonZero reports whether a --wait value asks to wait at all.
func waitNonZero(s string) bool {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	return err != nil || d != 0 // forever, or a duration
}

// guessLogFormat finds the log format for an error found before the flags
// could be parsed: the last --log-format among the flags of args, else
// LEADERRUN_LOG_FORMAT, else text; an invalid value means text. args is what came before "--" (hasDash)
// or the whole command line; without "--", the run form's command starts at
// the first word that is not a flag or its value.
func guessLogFormat(args []string, hasDash bool, scopes []scope, getenv func(string) string) string {
	valid := func(s string) bool { return s == "json" || s == "text" }
	union := map[string]flagInfo{}
	for _, s := range scopes {
		for n, f := range s.flags {
			union[n] = f
		}
	}
	found, seen, sub := "", false, false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if len(a) < 2 || a[0] != '-' {
			if !hasDash && !sub && !isSubcommand(a) {
				break // the run form's command
			}
			sub = true
			continue
		}
		name, value, has := strings.Cut(strings.TrimPrefix(a[1:], "-"), "=")
		f, ok := union[name]
		if ok && f.kind != kindBool && !has && i+1 < len(args) {
			i++
			value = args[i]
		}
		if name == "log-format" {
			found, seen = value, true
		}
	}
	if seen {
		// The flag beats the variable even when it is invalid: then the
		// format cannot be told, and the line is text.
		if valid(found) {
			return found
		}
		return "text"
	}
	if v := strings.TrimSpace(getenv(envOf("log-format"))); valid(v) {
		return v
	}
	return "text"
}

// flagString is cli.FlagStringer with the variable that takeEnv moved out
// of EnvVars shown again.
func flagString(base cli.FlagStringFunc) cli.FlagStringFunc {
	return func(f cli.Flag) string {
		s := base(f)
		if _, ok := f.(*cli.StringSliceFlag); ok {
			// "--pass-env VAR [ --pass-env VAR ]" would widen every row;
			// the usage says the flag is repeatable.
			if i := strings.Index(s, " [ --"); i >= 0 {
				if j := strings.Index(s[i:], " ]"); j >= 0 {
					s = s[:i] + s[i+j+2:]
				}
			}
		}
		if env := envOf(f.Names()[0]); env != "" {
			if df, ok := f.(cli.DocGenerationFlag); ok && len(df.GetEnvVars()) == 0 {
				s += fmt.Sprintf(" [$%s]", env)
			}
		}
		return s
	}
}

// otherVars are the LEADERRUN_* variables that are not a flag's: those
// leaderrun gives its child (childenv.go), and those a store or the
// dispatch reads.
var otherVars = []string{envLease, envLeaseHolder, envLeaseToken, envTokenDeprecated,
	"LEADERRUN_GUARD_PROGRAM", "LEADERRUN_REDIS_SENTINEL_PASSWORD"}

// testVarPrefix is the prefix of the variables leaderrun's own test suite
// sets (scripts/*.sh write the test servers' URLs there): never leaderrun's
// configuration, so never refused or warned about.
const testVarPrefix = "LEADERRUN_TEST_"

// knownVars are the LEADERRUN_* variables leaderrun reads or sets.
func knownVars() []string {
	known := slices.Clone(otherVars)
	for _, v := range flagVars {
		known = append(known, v)
	}
	return known
}

// nearestVar returns the known variable nearest to the unknown LEADERRUN_*
// variable k, or "" when none is a likely misspelling of it (within a third
// of the name's length).
func nearestVar(k string, known []string) string {
	name := strings.TrimPrefix(k, "LEADERRUN_")
	best, bestD := "", 0
	for _, kn := range known {
		if d := editDistance(name, strings.TrimPrefix(kn, "LEADERRUN_")); best == "" || d < bestD || d == bestD && kn < best {
			best, bestD = kn, d
		}
	}
	if best != "" && bestD <= max(1, len(name)/3) {
		return best
	}
	return ""
}

// unknownVars returns the LEADERRUN_* variables of environ that leaderrun
// neither reads nor sets, in order, without duplicates.
func unknownVars(environ []string) []string {
	known := knownVars()
	var out []string
	for _, kv := range environ {
		k, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "LEADERRUN_") || strings.HasPrefix(k, testVarPrefix) || slices.Contains(known, k) || slices.Contains(out, k) {
			continue
		}
		out = append(out, k)
	}
	return out
}

// misspeltVars returns one warning for each LEADERRUN_* variable in environ
// that leaderrun does not read but that is a likely misspelling of one it
// does (LEADERRUN_TLL for LEADERRUN_TTL): systemd units and CI set
// variables, not flags, and a typo there would otherwise be silently
// ignored. A LEADERRUN_* name far from every known one (a script's own
// LEADERRUN_JOB_DIR) is left alone: leaderrun does not own the prefix.
func misspeltVars(environ []string) []string {
	known := knownVars()
	var out []string
	for _, k := range unknownVars(environ) {
		if best := nearestVar(k, known); best != "" {
			out = append(out, fmt.Sprintf("%s is not a leaderrun variable and is ignored; did you mean %s?", printable(k), best))
		}
	}
	return out
}

// strayStoreVar refuses a run whose store was not given (neither --store nor
// LEADERRUN_STORE) while an unknown LEADERRUN_* variable of environ was
// evidently meant to give it: a near miss of LEADERRUN_STORE
// (LEADERRUN_STOR, LEADERRUN_STORE_URL), or any unknown variable whose value
// is a store URL (LEADERRUN_REDIS=redis://…). Ignoring it would take the
// lease in this host's file store, which excludes no other host: on a fleet
// every host would run the job. The value is never shown (it may hold a
// password).
func strayStoreVar(environ []string, getenv func(string) string) error {
	known := knownVars()
	for _, k := range unknownVars(environ) {
		name := strings.TrimPrefix(k, "LEADERRUN_")
		switch {
		case nearestVar(k, known) == storeVar || strings.HasPrefix(name, "STOR"):
			return lease.NewError(fmt.Sprintf("%s is not a leaderrun variable; did you mean %s? Without %s or --store the lease would be taken in this host's file store, which excludes no other host: nothing was run", printable(k), storeVar, storeVar), lease.ErrConfig)
		case looksLikeStoreURL(getenv(k)):
			return lease.NewError(fmt.Sprintf("%s holds a URL, but leaderrun reads the store only from %s or --store; without them the lease would be taken in this host's file store, which excludes no other host: nothing was run (rename the variable to %s, or give --store)", printable(k), storeVar, storeVar), lease.ErrConfig)
		}
	}
	return nil
}

// looksLikeStoreURL reports whether v is written as a URL: scheme:// with
// any scheme, or a scheme leaderrun knows followed by ':' (redis:host).
func looksLikeStoreURL(v string) bool {
	v = strings.ToLower(strings.TrimSpace(v))
	scheme, rest, ok := strings.Cut(v, ":")
	if !ok || scheme == "" || !isSchemeWord(scheme) {
		return false
	}
	_, known := drivers[scheme]
	return known || scheme == "file" || strings.HasPrefix(rest, "//")
}

// isSchemeWord reports whether s can be a URL scheme (RFC 3986: a letter,
// then letters, digits, + - .).
func isSchemeWord(s string) bool {
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z':
		case i > 0 && (r >= '0' && r <= '9' || r == '+' || r == '-' || r == '.'):
		default:
			return false
		}
	}
	return s != ""
}

// commandNames are the words that choose a form of the command line.
var commandNames = []string{"status", "watch", "history", "check", "help"}

// nearCommand refuses the first word of a command written without "--"
// when it looks like a mistyped or shortened leaderrun command: the user
// most likely meant the command, and running a program of that name under a
// lease instead (or failing with "command not found") is not what they
// asked for. A word that is no program on PATH is refused when it is within
// a third of its length of a command (stauts, Status, chek) or a prefix of
// one of three letters or more (stat, hist); a program on PATH only in the
// second case (stat: `svn stat`, `git stat…`), with how to run it: after
// "--", which always runs COMMAND as written. A program merely one letter
// from a command (patch, batch) runs as before.
func nearCommand(word string) error {
	if strings.Contains(word, "/") {
		return nil // a path names a program
	}
	low := strings.ToLower(word)
	_, notProgram := exec.LookPath(word)
	for _, c := range commandNames {
		prefix := len(low) >= 3 && strings.HasPrefix(c, low)
		near := editDistance(low, c) <= max(1, len(low)/3)
		switch {
		case notProgram != nil && (prefix || near):
			return usagef("unknown command %s; did you mean %s? (a program to run under the lease goes after --: leaderrun [flags] -- COMMAND)", shellQuote(printable(word)), c)
		case prefix:
			return usagef("%s is short for the command %s and is also a program: write leaderrun %s … for the command, or leaderrun [flags] -- %s … to run the program under a lease", shellQuote(printable(word)), c, c, shellQuote(printable(word)))
		}
	}
	return nil
}

// isSubcommand reports whether a word names a subcommand that takes a lease
// NAME.
func isSubcommand(a string) bool {
	switch a {
	case "status", "watch", "history", "check":
		return true
	}
	return false
}
