#!/usr/bin/env bash
# scripts/release.sh VERSION builds a release of leaderrun from a clean tree:
#
#   dist/VERSION/leaderrun_VERSION_linux_ARCH.tar.gz   all the programs (static),
#                                                      man page, completions, unit
#   dist/VERSION/leaderrun_VERSION_ARCH.deb            for Debian and Ubuntu
#   dist/VERSION/leaderrun-VERSION-1.ARCH.rpm          for RPM systems (nfpm's naming)
#   dist/VERSION/checksums.txt                         SHA-256 of each
#
# for ARCH amd64 and arm64. The version is stamped into the programs, so
# `leaderrun --version` prints it. The packages install the programs in
# /usr/bin, the man page leaderrun(1), bash/zsh/fish completions, the
# template unit leaderrun@.service and /etc/default/leaderrun (see
# docs/systemd.md). The man page and completions are written by
# internal/gendocs from the definition --help prints. The packages are built
# with nfpm (a Go module, run at a pinned version: it stays out of go.mod).
#
# Environment: RELEASE_ARCHES (default "amd64 arm64"), RELEASE_OUT (default
# dist), RELEASE_ALLOW_DIRTY=1 to build from a tree with local changes (tests).
set -euo pipefail
cd "$(dirname "$0")/.."

NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.45.2
version=${1:-}
version=${version#v}
if ! [[ $version =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]]; then
	echo "usage: scripts/release.sh VERSION (such as 1.4.0 or 1.4.0-rc.1)" >&2
	exit 2
fi
# Clean: no change to a tracked file, and no untracked file the build reads.
if [ "${RELEASE_ALLOW_DIRTY:-}" != 1 ] && { ! git diff --quiet HEAD -- ||
	[ -n "$(git ls-files --others --exclude-standard -- '*.go' go.mod go.sum 'scripts/package/*')" ]; }; then
	echo "release.sh: the tree has local changes; commit them first (git status)" >&2
	exit 1
fi
arches=${RELEASE_ARCHES:-amd64 arm64}
out=$(realpath -m "${RELEASE_OUT:-dist}/$version")
rm -rf "$out"
mkdir -p "$out"
work=$(mktemp -d /tmp/leaderrun-release.XXXXXX)
trap 'rm -rf "$work"' EXIT

echo "== man page and completions"
go run ./internal/gendocs -out "$work/share"
gzip -9n "$work/share/leaderrun.1"
cp scripts/package/leaderrun@.service scripts/package/leaderrun.default "$work/share/"

ldflags="-s -w -X github.com/leaderrun/leaderrun/cmd.stampedVersion=$version"
for arch in $arches; do
	echo "== linux/$arch"
	stage=$work/$arch
	mkdir -p "$stage/bin"
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "$ldflags" -o "$stage/bin/" . ./cmd/...
	cp -r "$work/share" "$stage/share"

	name=leaderrun_${version}_linux_$arch
	mkdir -p "$work/tar/$name"
	cp "$stage"/bin/* README.md "$work/tar/$name/"
	cp -r "$stage/share" "$work/tar/$name/share"
	tar -C "$work/tar" --owner=0 --group=0 --sort=name -czf "$out/$name.tar.gz" "$name"

	sed -e "s|\${STAGE}|$stage|g" -e "s|\${ARCH}|$arch|g" -e "s|\${VERSION}|$version|g" \
		scripts/package/nfpm.yaml > "$work/nfpm-$arch.yaml"
	for pkg in deb rpm; do
		go run "$NFPM" package --config "$work/nfpm-$arch.yaml" --packager "$pkg" --target "$out/"
	done
done

(cd "$out" && sha256sum -- *.tar.gz *.deb *.rpm > checksums.txt)
echo "== $out"
ls -l "$out"
