#!/usr/bin/env bash
# Downloads the public traces that `starcloud simulate` reads into ./traces
# (the simulator looks in ./traces, then ../shared/traces), in the layout of
# ../shared/traces:
#   traces/openb/          alibaba/clusterdata cluster-trace-gpu-v2023 (OpenB):
#                          packing mode, and time mode with `--time default`
#   traces/philly-gavel/   stanford-futuredata/gavel (MIT): the Philly-derived
#                          per-virtual-cluster traces msr-seed0/*.trace, the
#                          throughputs that give their run times, cluster sizes
#                          (`--time traces/philly-gavel/msr-seed0`)
#   traces/tiresias/       SymbioticLab/Tiresias: 60_job.csv and cluster specs
#                          (`--time traces/tiresias/60_job.csv`)
#   traces/fgd-reference/  nothing to download: the reference means come from
#                          running hkust-adsl/kubernetes-scheduler-simulator
# Needs curl and internet access. Existing files are kept; a failed download
# leaves no partial file, is reported, and the rest still run (exit status 1
# at the end). Usage: scripts/fetch-traces.sh [DEST]
set -euo pipefail
dest="${1:-traces}"
failed=0

get() { # URL FILE
	if [ -s "$2" ]; then
		echo "have $2"
		return
	fi
	echo "fetching $2"
	mkdir -p "$(dirname "$2")"
	if curl -fsSL --retry 3 -o "$2.part" "$1"; then
		mv "$2.part" "$2"
	else
		rm -f "$2.part"
		echo "failed: $1" >&2
		failed=1
	fi
}

base="https://raw.githubusercontent.com/alibaba/clusterdata/master/cluster-trace-gpu-v2023/csv"
files="openb_node_list_gpu_node.csv openb_node_list_all_node.csv"
for w in default cpu0 cpu037 cpu050 cpu072 cpu100 cpu200 cpu235 cpu250 cpu300 \
	gpushare20 gpushare40 gpushare60 gpushare80 gpushare100 \
	gpuspec05 gpuspec10 gpuspec20 gpuspec25 gpuspec33 \
	multigpu20 multigpu30 multigpu40 multigpu50; do
	files="$files openb_pod_list_$w.csv"
done
for f in $files; do
	get "$base/$f" "$dest/openb/$f"
done

base="https://raw.githubusercontent.com/stanford-futuredata/gavel/master/scheduler"
for vc in 0e4a51 103959 11cb48 23dbec 2869ce 51b7ef 6214e9 6c71a0 795a4c 7f04ca 925e2b \
	b436b2 e13805 ed69ec ee9e8c; do
	get "$base/traces/msr/seed=0/$vc.trace" "$dest/philly-gavel/msr-seed0/$vc.trace"
done
get "$base/simulation_throughputs.json" "$dest/philly-gavel/simulation_throughputs.json"
get "$base/traces/msr/cluster_specs.json" "$dest/philly-gavel/cluster_specs.json"

base="https://raw.githubusercontent.com/SymbioticLab/Tiresias/master/simulator"
for f in 60_job.csv cluster_spec.csv n160g8.csv; do
	get "$base/$f" "$dest/tiresias/$f"
done
echo "done: $dest"
exit "$failed"
