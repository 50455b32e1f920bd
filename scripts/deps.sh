#!/usr/bin/env bash
# Installs the Debian packages Starcloud builds and tests with, but only those
# that are missing, so `make` stays fast on a machine that already has them.
# Run as root on Debian 12; anything else is told what to install by hand.
# Kubernetes mode's test API server has build packages of its own (golang-go,
# rsync, jq, dpkg-dev, golang-github-modern-go-reflect2-dev and the kubernetes
# source package): scripts/kube-build.sh installs them when, and only when,
# it has to build, since the result is cached across checkouts.
set -eu
# Dashboard and monitoring tests: headless Chromium driven over the DevTools
# protocol (python3-websocket), promtool and a real Prometheus.
TEST_PKGS="chromium python3-websocket prometheus"
# Installation tests (docs/DEPLOY.md): the Debian package (debhelper), a
# fresh Debian root booted with its own systemd (debootstrap,
# systemd-container), systemd-analyze (systemd), groff for the man pages,
# and the backup tools the guide uses (etcd-client's etcdctl, sqlite3).
TEST_PKGS="$TEST_PKGS debhelper debootstrap systemd systemd-container groff-base etcd-client sqlite3"
# The generated zsh completion (starcloud completion zsh) is run by a real zsh.
TEST_PKGS="$TEST_PKGS zsh"
PKGS="build-essential clang clang-format pkg-config libjansson-dev libyaml-dev libcmocka-dev libuv1-dev
libhttp-parser-dev libcurl4-openssl-dev libssl-dev libsqlite3-dev zlib1g-dev libglpk-dev gnuplot-nox python3 python3-pytest
python3-requests python3-yaml prometheus wrk nginx-light curl etcd-server"
# End-to-end tests with the official OpenAI SDK (tests/e2e/node, installed by
# scripts/node-deps.sh with npm ci): Debian's nodejs and npm, unless a node and
# an npm are there already (a NodeSource nodejs bundles npm and conflicts with
# Debian's npm package).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	TEST_PKGS="$TEST_PKGS nodejs npm"
fi
missing=""
for p in $PKGS $TEST_PKGS; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing" >&2
if [ "$(id -u)" != 0 ]; then
	echo "deps: not root; please run: apt-get install$missing" >&2
	exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends $missing >/dev/null
