#!/bin/sh
# `make install`: lays out Starcloud under $DESTDIR (docs/DEPLOY.md).
#
#   BIN          the built binary (the Makefile passes build/starcloud)
#   GEN          folder of generated files (man pages, completions), or empty
#   PREFIX       /usr/local by default; /usr for a distribution package
#   SYSCONFDIR   configuration: /etc when PREFIX is /usr, else PREFIX/etc
#   UNITDIR      systemd units: PREFIX/lib/systemd/system
#   SYSUSERSDIR  sysusers.d: PREFIX/lib/sysusers.d
#   DESTDIR      staging root (packages); empty installs for real
#
# Configuration files are installed only where none exists: an operator's
# file is never overwritten. Paths inside the units and the examples follow
# PREFIX and SYSCONFDIR.
set -eu
: "${BIN:?BIN names the built binary}"
PREFIX=${PREFIX:-/usr/local}
if [ "$PREFIX" = /usr ]; then def_etc=/etc; else def_etc=$PREFIX/etc; fi
SYSCONFDIR=${SYSCONFDIR:-$def_etc}
UNITDIR=${UNITDIR:-$PREFIX/lib/systemd/system}
SYSUSERSDIR=${SYSUSERSDIR:-$PREFIX/lib/sysusers.d}
DESTDIR=${DESTDIR:-}
GEN=${GEN:-}
BINDIR=$PREFIX/bin
DOCDIR=$PREFIX/share/doc/starcloud
MANDIR=$PREFIX/share/man
COMPDIR=$PREFIX/share/bash-completion/completions
ZSHCOMPDIR=$PREFIX/share/zsh/vendor-completions
top=$(cd "$(dirname "$0")/.." && pwd)

case $PREFIX$SYSCONFDIR$UNITDIR$SYSUSERSDIR in
*[!A-Za-z0-9/._-]*) echo "install: paths may hold only A-Za-z0-9/._-" >&2; exit 2 ;;
esac
case $PREFIX in /*) ;; *) echo "install: PREFIX must be absolute: $PREFIX" >&2; exit 2 ;; esac

# The units and examples name /usr/bin/starcloud, /etc/starcloud and
# /usr/share/doc/starcloud; rewritten for another layout.
paths() {
	sed -e "s|/usr/bin/starcloud|$BINDIR/starcloud|g" \
	    -e "s|/etc/starcloud|$SYSCONFDIR/starcloud|g" \
	    -e "s|/usr/share/doc/starcloud|$DOCDIR|g" "$1"
}

put() { # mode source dest (dest is a file path under DESTDIR)
	install -D -m "$1" "$2" "$DESTDIR$3"
}

put 0755 "$BIN" "$BINDIR/starcloud"

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
for u in "$top"/deploy/systemd/*.service; do
	paths "$u" > "$tmp"
	put 0644 "$tmp" "$UNITDIR/$(basename "$u")"
done
put 0644 "$top/deploy/systemd/starcloud.sysusers" "$SYSUSERSDIR/starcloud.conf"

# Configuration: the daemons' files (they may hold tokens: not world-readable).
install -d -m 0750 "$DESTDIR$SYSCONFDIR/starcloud"
for c in server agent gateway; do
	dest="$DESTDIR$SYSCONFDIR/starcloud/$c.yaml"
	if [ -e "$dest" ]; then
		echo "install: keeping $SYSCONFDIR/starcloud/$c.yaml" >&2
	else
		paths "$top/deploy/config/$c.yaml" > "$tmp"
		install -m 0640 "$tmp" "$dest"
	fi
done

# Examples and documentation.
for c in "$top"/deploy/config/*.yaml; do
	paths "$c" > "$tmp"
	put 0644 "$tmp" "$DOCDIR/examples/config/$(basename "$c")"
done
for m in "$top"/examples/*.yaml; do
	put 0644 "$m" "$DOCDIR/examples/$(basename "$m")"
done
for d in README.md docs/DEPLOY.md docs/HA.md docs/AGENT.md docs/CONTROL_PLANE.md \
	 docs/GATEWAY.md docs/MANIFESTS.md; do
	[ -e "$top/$d" ] && put 0644 "$top/$d" "$DOCDIR/$(basename "$d")"
done

# Generated from the flag tables (man pages per verb group, completions).
if [ -n "$GEN" ] && [ -d "$GEN/man" ]; then
	for m in "$GEN"/man/*.[18]; do
		[ -e "$m" ] || continue
		sec=${m##*.}
		put 0644 "$m" "$MANDIR/man$sec/$(basename "$m")"
	done
fi
if [ -n "$GEN" ] && [ -e "$GEN/completion/starcloud.bash" ]; then
	put 0644 "$GEN/completion/starcloud.bash" "$COMPDIR/starcloud"
fi
if [ -n "$GEN" ] && [ -e "$GEN/completion/_starcloud" ]; then
	put 0644 "$GEN/completion/_starcloud" "$ZSHCOMPDIR/_starcloud"
fi
echo "installed starcloud in ${DESTDIR:-/}${DESTDIR:+ }(prefix $PREFIX, configuration $SYSCONFDIR/starcloud)"
