#!/usr/bin/env bash
# Simulator benchmarks: one FGD run on the default OpenB workload, then the
# full sweep (5 workloads x 7 policies x 10 seeds) on all cores. Prints wall
# times; record them in docs/BENCHMARKS.md with the machine and date.
set -eu
bin="${1:-build/starcloud}"
if [ ! -e ../shared/traces/openb/openb_pod_list_default.csv ] && [ ! -e traces/openb/openb_pod_list_default.csv ]; then
	echo "sim bench: SKIPPED (no traces; run scripts/fetch-traces.sh)"
	exit 0
fi
echo "== one FGD run (default workload, seed 42)"
/usr/bin/time -f "wall %e s, max RSS %M KiB" "$bin" simulate --pods default --policy fgd --seed 42 --json
echo "== sweep: 5 workloads x 7 policies x seeds 42-51 on $(nproc) cores"
/usr/bin/time -f "wall %e s, max RSS %M KiB" "$bin" simulate --sweep --quiet >/dev/null
