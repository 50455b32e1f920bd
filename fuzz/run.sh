#!/usr/bin/env bash
# Runs each fuzz target for a bounded number of inputs, seeded with the
# project's own manifests and traces. A crash, leak or sanitizer report
# fails the run. Usage: fuzz/run.sh BUILD_DIR [RUNS]
set -eu
build=$1
runs=${2:-20000}
corpus=$(mktemp -d)
trap 'rm -rf "$corpus"' EXIT
mkdir -p "$corpus/manifest" "$corpus/trace"
cp examples/*.yaml tests/scenarios/*.yaml "$corpus/manifest/" 2>/dev/null || true
for f in ../shared/traces/openb/openb_node_list_gpu_node.csv; do
	[ -f "$f" ] && head -c 4000 "$f" > "$corpus/trace/nodes.csv"
done
printf 'sn,cpu_milli,memory_mib,gpu,model\nn1,96000,393216,8,V100M32\n' > "$corpus/trace/seed.csv"
pass=0 fail=0
for t in manifest trace; do
	if "$build/fuzz_$t" -runs="$runs" -max_len=8192 -seed=1 "$corpus/$t" >"$corpus/$t.log" 2>&1; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		tail -40 "$corpus/$t.log"
	fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
