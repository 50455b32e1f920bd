#!/usr/bin/env bash
# Builds the kube-apiserver (and, on request, the stock kube-scheduler) that
# the Kubernetes-mode tests and benchmark run against, from Debian 12's
# `kubernetes` source package (1.20.2), offline, with Debian's Go 1.19.
#
#   scripts/kube-build.sh [kube-apiserver] [kube-scheduler]
#
# With no argument only kube-apiserver is built. The source tree and the
# binaries live OUTSIDE the checkout, in $STARCLOUD_KUBE_CACHE (default
# /var/cache/starcloud/kube): the first build costs about 15 CPU-minutes, so
# every later run (and every clone) reuses it. The binaries end up in
# $STARCLOUD_KUBE_CACHE/bin/. On success the script prints that directory.
#
# Exit status: 0 built or already cached; 2 cannot build on this machine (not
# root and packages missing, no deb-src reachable, ...): the reason is on
# stderr and in $STARCLOUD_KUBE_CACHE/failed so tests can skip quoting it.
#
# Two pitfalls (../shared/reference/kubernetes.md) are handled here:
# 1. Module mode fails on this tree, so it is built in GOPATH mode through the
#    tree's own Makefile, as Debian's packaging does (rsync is needed by the
#    code generators).
# 2. The vendored modern-go/reflect2 1.0.1 reads Go's map internals as they
#    were before Go 1.18 and crashes the server within seconds; it is replaced
#    by Debian's 1.0.2 sources (golang-github-modern-go-reflect2-dev).
set -eu

CACHE="${STARCLOUD_KUBE_CACHE:-/var/cache/starcloud/kube}"
BIN="$CACHE/bin"
targets="$*"
[ -z "$targets" ] && targets="kube-apiserver"

fail() {
	echo "kube-build: $*" >&2
	mkdir -p "$CACHE" 2>/dev/null && echo "$*" >"$CACHE/failed" 2>/dev/null
	exit 2
}

all_built() {
	for t in $targets; do
		[ -x "$BIN/$t" ] || return 1
	done
	return 0
}

if all_built; then
	echo "$BIN"
	exit 0
fi

for t in $targets; do
	case "$t" in
	kube-apiserver | kube-scheduler) ;;
	*) echo "kube-build: unknown target '$t' (kube-apiserver or kube-scheduler)" >&2; exit 1 ;;
	esac
done

mkdir -p "$CACHE" || fail "cannot create $CACHE (set STARCLOUD_KUBE_CACHE to a writable directory)"
# Two `make test` runs (two worktrees, or CI and a developer) must not build
# into the same tree at once: the second waits for the first and then finds
# the binaries.
exec 9>"$CACHE/.lock"
flock 9
if all_built; then
	echo "$BIN"
	exit 0
fi
rm -f "$CACHE/failed"

# --- build dependencies and the source package -------------------------------
PKGS="golang-go rsync jq golang-github-modern-go-reflect2-dev dpkg-dev"
missing=""
for p in $PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
SRCLIST=/etc/apt/sources.list.d/starcloud-deb-src.sources
need_src=0
ls "$CACHE"/src/kubernetes-*/Makefile >/dev/null 2>&1 || need_src=1
if [ -n "$missing" ] || [ "$need_src" = 1 ]; then
	if [ "$(id -u)" != 0 ]; then
		[ -n "$missing" ] && fail "not root: cannot install the build packages:$missing"
		fail "not root: cannot fetch the kubernetes source package (apt-get source kubernetes)"
	fi
	export DEBIAN_FRONTEND=noninteractive
	if [ "$need_src" = 1 ] && ! grep -rqs '^Types:.*deb-src\|^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		# Source packages come from the mirror the machine already uses.
		uri=$(sed -n 's/^URIs: *//p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)
		[ -z "$uri" ] && uri=$(sed -n 's/^deb \+\(http[^ ]*\) \+bookworm .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -1)
		[ -z "$uri" ] && fail "no Debian mirror found in /etc/apt to add a deb-src entry for"
		printf 'Types: deb-src\nURIs: %s\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
			"$uri" >"$SRCLIST"
	fi
	apt-get update -qq || fail "apt-get update failed"
	if [ -n "$missing" ]; then
		apt-get install -y -qq --no-install-recommends $missing >/dev/null ||
			fail "apt-get install$missing failed"
	fi
	if [ "$need_src" = 1 ]; then
		rm -rf "$CACHE/src"
		mkdir -p "$CACHE/src"
		(cd "$CACHE/src" && apt-get source -qq kubernetes >/dev/null 2>&1) ||
			fail "apt-get source kubernetes failed (is a deb-src entry reachable?)"
	fi
fi
TREE=$(ls -d "$CACHE"/src/kubernetes-*/ 2>/dev/null | head -1)
TREE="${TREE%/}"
[ -f "$TREE/Makefile" ] || fail "no kubernetes tree under $CACHE/src"

# --- pitfall 2: reflect2 ------------------------------------------------------
R2=/usr/share/gocode/src/github.com/modern-go/reflect2
[ -d "$R2" ] || fail "$R2 missing (golang-github-modern-go-reflect2-dev)"
if ! grep -qs 'starcloud: reflect2 1.0.2' "$TREE/vendor/github.com/modern-go/reflect2/.starcloud"; then
	rm -rf "$TREE/vendor/github.com/modern-go/reflect2"
	mkdir -p "$TREE/vendor/github.com/modern-go/reflect2"
	cp -r "$R2"/. "$TREE/vendor/github.com/modern-go/reflect2/"
	rm -f "$TREE/vendor/github.com/modern-go/reflect2/go.mod" "$TREE/vendor/github.com/modern-go/reflect2/go.sum"
	echo 'starcloud: reflect2 1.0.2 from Debian' >"$TREE/vendor/github.com/modern-go/reflect2/.starcloud"
fi

# --- pitfall 1: GOPATH mode through the tree's Makefile ------------------------
mkdir -p "$TREE/.go/src/k8s.io"
ln -sfn "$TREE" "$TREE/.go/src/k8s.io/kubernetes"
export GOPATH="$TREE/.go" CGO_ENABLED=0
export GOCACHE="$CACHE/go-build" HOME="${HOME:-/root}"
mkdir -p "$BIN"
for t in $targets; do
	[ -x "$BIN/$t" ] && continue
	echo "kube-build: building $t in $TREE (the first build takes ~15 CPU-minutes)" >&2
	(cd "$TREE/.go/src/k8s.io/kubernetes" && nice make WHAT="cmd/$t" >"$CACHE/build-$t.log" 2>&1) ||
		fail "make WHAT=cmd/$t failed; see $CACHE/build-$t.log"
	out="$TREE/_output/local/bin/linux/amd64/$t"
	[ -x "$out" ] || out=$(find "$TREE/_output" -type f -name "$t" | head -1)
	[ -x "$out" ] || fail "$t not found under $TREE/_output after the build"
	cp "$out" "$BIN/$t.tmp" && mv "$BIN/$t.tmp" "$BIN/$t"
done
echo "$BIN"
