#!/bin/sh
# `make package`: builds the Debian package with Debian's own tooling
# (debian/, dpkg-buildpackage -b) in a copy of the source tree under OUT,
# so the build leaves the checkout alone and the .deb lands in OUT:
#   OUT/starcloud_<version>_<arch>.deb
# The copy holds the files git knows (committed or not, ignored ones left
# out), or, outside a git checkout, everything but the build folders.
set -eu
out=${1:-build/package}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
for tool in dpkg-buildpackage dpkg-parsechangelog dh; do
	command -v "$tool" >/dev/null || {
		echo "package: $tool is missing: apt-get install dpkg-dev debhelper" >&2
		exit 1
	}
done
version=$(dpkg-parsechangelog -S Version)
mkdir -p "$out"
out=$(cd "$out" && pwd)
src=$out/starcloud-$version
rm -rf "$src" "$out"/starcloud_* "$out"/starcloud-dbgsym_*
mkdir -p "$src"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
	git ls-files -z -co --exclude-standard | grep -zv '^build' |
		tar --null --ignore-failed-read -T - -cf - | tar -C "$src" -xf -
else
	tar --exclude='./build*' --exclude=./.git -cf - . | tar -C "$src" -xf -
fi
# -b: binary only; -us -uc: unsigned (a repository signs what it publishes).
(cd "$src" && dpkg-buildpackage -b -us -uc) > "$out/build.log" 2>&1 || {
	tail -40 "$out/build.log" >&2
	echo "package: dpkg-buildpackage failed; the whole log is $out/build.log" >&2
	exit 1
}
rm -rf "$src"
ls "$out"/starcloud_"$version"_*.deb
