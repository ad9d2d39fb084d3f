#!/usr/bin/env bash
# scripts/release.sh builds a release of leaderrun from a clean tree; run
# `scripts/release.sh --help` for what it writes, its options and what it
# needs. The man page and completions are written by internal/gendocs from
# the definition --help prints; the packages are built with nfpm (a Go
# module, run at a pinned version: it stays out of go.mod).
set -euo pipefail
cd "$(dirname "$0")/.."

NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2

usage() {
	cat <<EOF
usage: scripts/release.sh [--arch ARCH]... [--out DIR] [--allow-dirty] VERSION

Builds leaderrun VERSION (such as 1.4.0 or 1.4.0-rc.1) from a tree without
local changes, into DIR/VERSION (default dist/VERSION):

  leaderrun_VERSION_linux_ARCH.tar.gz   every program (static), README.md, docs/,
                                        LICENSE (Apache-2.0), copyright and
                                        third-party licences, the
                                        man page, completions and systemd unit
  leaderrun_VERSION_ARCH.deb            for Debian and Ubuntu (into /usr/bin)
  leaderrun-VERSION-1.ARCH.rpm          for Fedora, RHEL, SUSE (into /usr/bin)
  checksums.txt                         SHA-256 of each

The version and the commit are stamped into the programs (leaderrun
--version prints them); build from a clone (in a git worktree Go finds no
commit, and only --allow-dirty builds without one).

Options (each also read from the variable in brackets):
  --arch ARCH      an architecture to build: amd64 or arm64; repeat for both
                   (default both) [RELEASE_ARCHES="amd64 arm64"]
  --out DIR        write into DIR/VERSION [RELEASE_OUT=DIR]
  --allow-dirty    build from a tree with local changes (tests) [RELEASE_ALLOW_DIRTY=1]
  -h, --help       show this

Needs: Go 1.26 or later, git, gzip, sha256sum, and the network unless the Go
module cache already holds go.sum's modules and nfpm $NFPM
(GOFLAGS=-mod=mod and GOPROXY apply as usual). The first build of an
architecture compiles the standard library and every module for it: several
minutes on a small machine; the progress is shown.
EOF
}

arches=${RELEASE_ARCHES:-}
outdir=${RELEASE_OUT:-dist}
dirty=${RELEASE_ALLOW_DIRTY:-}
version=
while [ $# -gt 0 ]; do
	case $1 in
	-h | --help) usage; exit 0 ;;
	--arch) [ $# -ge 2 ] || { echo "release.sh: --arch needs amd64 or arm64" >&2; exit 2; }
		arches="${arches:+$arches }$2"; shift ;;
	--arch=*) arches="${arches:+$arches }${1#--arch=}" ;;
	--out) [ $# -ge 2 ] || { echo "release.sh: --out needs a directory" >&2; exit 2; }
		outdir=$2; shift ;;
	--out=*) outdir=${1#--out=} ;;
	--allow-dirty) dirty=1 ;;
	-*) echo "release.sh: unknown option $1 (see scripts/release.sh --help)" >&2; exit 2 ;;
	*) [ -z "$version" ] || { echo "release.sh: one VERSION only, got $version and $1" >&2; exit 2; }
		version=$1 ;;
	esac
	shift
done
arches=${arches:-amd64 arm64}
version=${version#v}
if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]]; then
	echo "usage: scripts/release.sh [--arch ARCH]... [--out DIR] [--allow-dirty] VERSION (such as 1.4.0 or 1.4.0-rc.1); see --help" >&2
	exit 2
fi
for arch in $arches; do
	case $arch in
	amd64 | arm64) ;;
	*) echo "release.sh: architecture $arch: want amd64 or arm64" >&2; exit 2 ;;
	esac
done
# Clean: no change to a tracked file, and no untracked file the build reads.
if [ "$dirty" != 1 ] && { ! git diff --quiet HEAD -- ||
	[ -n "$(git ls-files --others --exclude-standard -- '*.go' go.mod go.sum 'scripts/package/*' README.md LICENSE THIRD_PARTY_LICENSES 'docs/*.md')" ]; }; then
	echo "release.sh: the tree has local changes; commit them first (git status), or --allow-dirty" >&2
	exit 1
fi
out=$(realpath -m "$outdir/$version")
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d /tmp/leaderrun-release.XXXXXX)
trap 'rm -rf "$work"' EXIT
start=$SECONDS
step() { echo "== [$((SECONDS - start))s] $*"; }

step "release $version for linux/{${arches// /,}} into $out"
step "Go modules (from the network unless the module cache has them)"
if ! go mod download -x 2> "$work/download.log"; then
	cat "$work/download.log" >&2
	exit 1
fi
grep -E '^# get .*: 200' "$work/download.log" | sed 's/^# get /   fetched /; s/: 200.*//' || true
go mod verify >/dev/null
step "nfpm (from the network unless the module cache has it)"
go run "$NFPM" --version >/dev/null

step "man page, completions, docs"
go run ./internal/gendocs -out "$work/share" -version "$version"
gzip -9n "$work/share/leaderrun.1"
cp scripts/package/leaderrun@.service scripts/package/leaderrun-sandboxed@.service scripts/package/leaderrun.default "$work/share/"
# What the packages put in /usr/share/doc/leaderrun, and the archive at its top.
doc=$work/doc
mkdir -p "$doc/docs"
cp README.md LICENSE THIRD_PARTY_LICENSES scripts/package/copyright "$doc/"
cp docs/*.md "$doc/docs/"
# THIRD_PARTY_LICENSES lists the modules the programs link, with their
# licences: refuse a release whose list is out of date.
go run ./scripts/thirdparty -check

ldflags="-s -w -X github.com/leaderrun/leaderrun/cmd.stampedVersion=$version"
for arch in $arches; do
	stage=$work/$arch
	mkdir -p "$stage/bin"
	step "linux/$arch: go build (the first build of an architecture compiles the standard library and every module; each package is listed as it is compiled)"
	# -buildvcs=true: --version names the commit, even where go env's
	# GOFLAGS says -buildvcs=false.
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -v -trimpath -buildvcs=true -tags urfave_cli_no_docs -ldflags "$ldflags" -o "$stage/bin/" . ./cmd/... 2>&1 |
		sed 's/^/   /'
	if ! go version -m "$stage/bin/leaderrun" | grep -q 'vcs.revision='; then
		# Go finds the commit only in a checkout whose .git is a directory:
		# not in a `git worktree`, whose .git is a file.
		[ "$dirty" = 1 ] || { echo "release.sh: go build stamped no commit into leaderrun (build from a clone, not a git worktree)" >&2; exit 1; }
		echo "release.sh: warning: no commit stamped (a git worktree?); --version will not name one" >&2
	fi
	cp -r "$work/share" "$stage/share"
	cp -r "$doc" "$stage/doc"

	name=leaderrun_${version}_linux_$arch
	step "linux/$arch: $name.tar.gz"
	mkdir -p "$work/tar/$name"
	cp "$stage"/bin/* "$work/tar/$name/"
	cp -r "$doc"/. "$work/tar/$name/"
	cp -r "$stage/share" "$work/tar/$name/share"
	tar -C "$work/tar" --owner=0 --group=0 --sort=name -czf "$out/$name.tar.gz" "$name"

	sed -e "s|\${STAGE}|$stage|g" -e "s|\${ARCH}|$arch|g" -e "s|\${VERSION}|$version|g" \
		scripts/package/nfpm.yaml > "$work/nfpm-$arch.yaml"
	for pkg in deb rpm; do
		step "linux/$arch: .$pkg (nfpm)"
		go run "$NFPM" package --config "$work/nfpm-$arch.yaml" --packager "$pkg" --target "$out/" | sed 's/^/   /'
	done
done

(cd "$out" && sha256sum -- *.tar.gz *.deb *.rpm > checksums.txt)
step "done: $out"
ls -l "$out"
