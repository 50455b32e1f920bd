#!/usr/bin/env bash
# Installs the Node.js packages of DIR (tests/e2e/node: the official openai
# SDK the end-to-end tests drive the gateway with) exactly as its committed
# package-lock.json says, with `npm ci`, and only when they are missing or
# the lock file changed since. Without node/npm it says so and does nothing:
# those tests then skip with that reason (scripts/deps.sh installs them).
set -eu
dir=${1:-tests/e2e/node}
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "node-deps: node or npm missing; the tests that use the OpenAI SDK will skip" >&2
	exit 0
fi
stamp="$dir/node_modules/.package-lock.json"
if [ -f "$stamp" ] && [ ! "$dir/package-lock.json" -nt "$stamp" ]; then
	exit 0
fi
echo "node-deps: npm ci in $dir" >&2
cd "$dir"
npm ci --no-audit --no-fund --loglevel=error
