package run

import (
	"path/filepath"
	"strings"
)

// launcher reports whether name is a command that says nothing about the
// job it runs: a shell, an interpreter, or a wrapper that runs another
// command. Used as the default lease name, every `python3 …`, `sh -c …` or
// `sudo …` job would share one lease, so leaderrun asks for --name
// instead. A switch, not a map, which would be built at every start.
// docs/usage.md lists them; keep the two in step.
func launcher(name string) bool {
	switch name {
	case "sh", "ash", "bash", "dash", "zsh", "ksh", "mksh",
		"pdksh", "yash", "csh", "tcsh", "fish", "nu", "elvish",
		"xonsh", "busybox", "toybox", "pwsh", "powershell": // shells
		return true
	case "python", "pypy", "uv", "poetry", "pipenv",
		"perl", "ruby", "irb", "bundle", "rake",
		"node", "nodejs", "deno", "bun", "npm", "npx", "yarn", "pnpm",
		"php", "java", "kotlin", "scala", "groovy", "dotnet", "mono",
		"lua", "luajit", "rscript", "r", "julia", "tclsh", "wish",
		"expect", "awk", "gawk", "mawk", "osascript", "go", "cargo",
		"make", "gmake", "just": // interpreters and language runners
		return true
	case "env", "exec", "command", "timeout", "nice", "ionice", "nohup",
		"setsid", "stdbuf", "chrt", "taskset", "numactl", "time",
		"sudo", "doas", "su", "runuser", "setpriv", "xargs",
		"flock", "chronic", "ssh", "docker", "podman", "kubectl",
		"systemd-run", "unshare", "nsenter", "chroot", "watch", "strace": // wrappers that run another command
		return true
	}
	return false
}

// IsLauncher reports whether command's base name is a shell, interpreter or
// wrapper, case-insensitively and ignoring a version suffix (python3.11,
// lua5.4, php8.2, tclsh8.6, pypy3).
func IsLauncher(command string) bool {
	base := strings.ToLower(filepath.Base(command))
	if launcher(base) {
		return true
	}
	trimmed := strings.TrimRight(base, "0123456789.-_")
	return trimmed != base && launcher(trimmed)
}
