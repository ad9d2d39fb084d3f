package cmd

import (
	"path/filepath"
	"strings"
)

// launchers are commands whose base name says nothing about the job they
// run: shells, interpreters, and wrappers that run another command. Used as
// the default lease name, every `python3 …`, `sh -c …` or `sudo …` job would
// share one lease, so leaderrun asks for --name instead.
// docs/usage.md lists them; keep the two in step.
var launchers = map[string]bool{
	// shells
	"sh": true, "ash": true, "bash": true, "dash": true, "zsh": true, "ksh": true, "mksh": true,
	"pdksh": true, "yash": true, "csh": true, "tcsh": true, "fish": true, "nu": true, "elvish": true,
	"xonsh": true, "busybox": true, "toybox": true, "pwsh": true, "powershell": true,
	// interpreters and language runners
	"python": true, "pypy": true, "uv": true, "poetry": true, "pipenv": true,
	"perl": true, "ruby": true, "irb": true, "bundle": true, "rake": true,
	"node": true, "nodejs": true, "deno": true, "bun": true, "npm": true, "npx": true, "yarn": true, "pnpm": true,
	"php": true, "java": true, "kotlin": true, "scala": true, "groovy": true, "dotnet": true, "mono": true,
	"lua": true, "luajit": true, "rscript": true, "r": true, "julia": true, "tclsh": true, "wish": true,
	"expect": true, "awk": true, "gawk": true, "mawk": true, "osascript": true, "go": true, "cargo": true,
	"make": true, "gmake": true, "just": true,
	// wrappers that run another command
	"env": true, "exec": true, "command": true, "timeout": true, "nice": true, "ionice": true, "nohup": true,
	"setsid": true, "stdbuf": true, "chrt": true, "taskset": true, "numactl": true, "time": true,
	"sudo": true, "doas": true, "su": true, "runuser": true, "setpriv": true, "xargs": true,
	"flock": true, "chronic": true, "ssh": true, "docker": true, "podman": true, "kubectl": true,
	"systemd-run": true, "unshare": true, "nsenter": true, "chroot": true, "watch": true, "strace": true,
}

// isLauncher reports whether command's base name is a shell, interpreter or
// wrapper, case-insensitively and ignoring a version suffix (python3.11,
// lua5.4, php8.2, tclsh8.6, pypy3).
func isLauncher(command string) bool {
	base := strings.ToLower(filepath.Base(command))
	if launchers[base] {
		return true
	}
	trimmed := strings.TrimRight(base, "0123456789.-_")
	return trimmed != base && launchers[trimmed]
}
