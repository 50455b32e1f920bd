#!/usr/bin/env bash
# Downloads the public traces that `starcloud simulate` reads into ./traces
# (the simulator looks in ./traces, then ../shared/traces):
#   traces/openb/          alibaba/clusterdata cluster-trace-gpu-v2023 (OpenB)
#   traces/fgd-reference/  nothing to download: the reference means come from
#                          running hkust-adsl/kubernetes-scheduler-simulator
# Needs curl and internet access. Existing files are kept.
set -euo pipefail
dest="${1:-traces}"
base="https://raw.githubusercontent.com/alibaba/clusterdata/master/cluster-trace-gpu-v2023/csv"
mkdir -p "$dest/openb"
files="openb_node_list_gpu_node.csv openb_node_list_all_node.csv"
for w in default cpu0 cpu037 cpu050 cpu072 cpu100 cpu200 cpu235 cpu250 cpu300 \
	gpushare20 gpushare40 gpushare60 gpushare80 gpushare100 \
	gpuspec05 gpuspec10 gpuspec20 gpuspec25 gpuspec33 \
	multigpu20 multigpu30 multigpu40 multigpu50; do
	files="$files openb_pod_list_$w.csv"
done
for f in $files; do
	if [ -s "$dest/openb/$f" ]; then
		echo "have $dest/openb/$f"
		continue
	fi
	echo "fetching $f"
	curl -fsSL --retry 3 -o "$dest/openb/$f.part" "$base/$f"
	mv "$dest/openb/$f.part" "$dest/openb/$f"
done
echo "done: $dest/openb"
