#!/usr/bin/env bash
# `make run`, second half: a local cluster (`starcloud dev`: server + one agent
# with declared GPUs), the example job submitted to it, its log printed.
set -eu
BIN=${1:-build/starcloud}
DIR=$(mktemp -d /tmp/starcloud-run-XXXXXX)
chmod 711 "$DIR"  # pods run as their own uids and pass through it (docs/SECURITY.md)
export HOME=$DIR   # the dev config goes here, not into the user's own
"$BIN" dev --agents 1 --gpus 2xA100-80GB --data-dir "$DIR/data" > "$DIR/dev.out" 2> "$DIR/dev.err" &
DEV=$!
trap 'kill $DEV 2>/dev/null; wait $DEV 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q '^config:' "$DIR/dev.out" 2>/dev/null && break; sleep 0.1; done
cat "$DIR/dev.out"
"$BIN" apply -f examples/dev-job.yaml
for _ in $(seq 100); do
	"$BIN" get jobs hello -o json | grep -q '"phase": *"Succeeded"' && break
	sleep 0.2
done
"$BIN" get jobs
echo "--- starcloud logs hello"
"$BIN" logs hello
# On a terminal the cluster stays up for the user to try (the addresses and
# token are above, and the CLI finds them in $HOME/.config/starcloud/config);
# elsewhere (CI, scripts) the demo ends here.
if [ -t 1 ]; then
	echo "--- the dev cluster keeps running; try: HOME=$DIR $BIN get nodes"
	echo "--- press Ctrl-C to stop it"
	wait $DEV
fi
