#!/bin/sh
# Generates the man pages and the bash completion from the binary's flag
# tables (base/flagdoc.h), so they say what --help says:
#   scripts/gen-docs.sh BIN OUTDIR  ->  OUTDIR/man/*.1 *.8, OUTDIR/completion/starcloud.bash
#                                    and OUTDIR/completion/_starcloud (zsh)
# A page per verb group (below); each verb's section is its `--help-man`.
# A verb without a flag table (version) gets its --help text.
set -eu
bin=$1
out=$2
version=$("$bin" version | cut -d' ' -f2)
mkdir -p "$out/man" "$out/completion"

# name section title description verbs...
groups='
starcloud-server 8 "the control plane" "The REST API, the store (SQLite or etcd), the scheduling loop and the controllers. One or several servers; with etcd one is elected leader. starcloud k8s schedules a Kubernetes cluster instead (docs/KUBERNETES.md)." server k8s
starcloud-agent 8 "the node agent" "Registers a node, runs the pods bound to it, probes and restarts them, adopts them after a restart; its pod guard fences them when the lease lapses." agent guard
starcloud-gateway 8 "the serving gateway" "OpenAI-compatible and KServe v2 gateway: balancing, retries, ejection, load shedding, canary rollouts, prefill/decode disaggregation." gateway
starcloud-worker 8 "the reference model worker" "Serves a llama2.c checkpoint over OpenAI and KServe v2." worker
starcloud-store 8 "store maintenance" "Copies a store (SQLite or etcd) into an empty one: migration and online backups; reads the audit log." store audit
starcloud-objects 1 "the cluster from the command line" "Create, read, change and watch the objects of a running control plane." apply get describe delete explain top drain token logs rollout
starcloud-offline 1 "scheduling without a cluster" "Schedules manifests, simulates traces and measures the scheduler, without a server." schedule simulate bench version
starcloud-dev 1 "a local cluster" "Starts a server, agents and optionally a gateway on this machine for trying things out." dev
starcloud-k8s 8 "the scheduler of a Kubernetes cluster" "Schedules the pods of a Kubernetes cluster that name this scheduler, with KAI Queues and PodGroups." k8s
'

section() { # verb
	if ! "$bin" "$1" --help-man 2>/dev/null; then
		printf '.SS "starcloud %s"\n.nf\n' "$1"
		"$bin" "$1" --help 2>&1 | sed -e 's/\\/\\e/g' -e 's/^[.'"'"']/\\\&&/'
		printf '.fi\n'
	fi
}

echo "$groups" | while read -r line; do
	[ -n "$line" ] || continue
	eval "set -- $line"
	name=$1 sec=$2 title=$3 desc=$4
	shift 4
	upper=$(echo "$name" | tr a-z A-Z)
	{
		printf '.TH %s %s "" "starcloud %s" "Starcloud"\n' "$upper" "$sec" "$version"
		printf '.SH NAME\n%s \\- %s\n.SH DESCRIPTION\n%s\n' "$name" "$title" "$desc"
		printf '.SH COMMANDS\n'
		for v in "$@"; do section "$v"; done
		printf '.SH FILES\n/etc/starcloud/*.yaml: configuration of the daemons (keys are the long\noptions without their dashes).\n'
		printf '.SH SEE ALSO\n\\fBstarcloud\\fR(1), /usr/share/doc/starcloud/DEPLOY.md\n'
	} > "$out/man/$name.$sec"
done
# A verb no group names (a new one) still gets a page of its own.
"$bin" help --verbs | while IFS="$(printf '\t')" read -r v summary; do
	echo "$groups" | grep -q " $v\( \|\$\)" && continue
	upper=$(echo "starcloud-$v" | tr a-z A-Z)
	{
		printf '.TH %s 1 "" "starcloud %s" "Starcloud"\n' "$upper" "$version"
		printf '.SH NAME\nstarcloud-%s \\- %s\n.SH COMMANDS\n' "$v" "$summary"
		section "$v"
	} > "$out/man/starcloud-$v.1"
done
"$bin" help --man > "$out/man/starcloud.1"
{
	printf '.SH SEE ALSO\n'
	echo "$groups" | awk 'NF { printf "\\fB%s\\fR(%s)\n.br\n", $1, $2 }'
} >> "$out/man/starcloud.1"

# Completion: the binary writes it from the same tables (starcloud
# completion, src/cli/cli_complete.c): verbs, flags with their choices and
# files, kinds and object names.
"$bin" completion bash > "$out/completion/starcloud.bash"
"$bin" completion zsh > "$out/completion/_starcloud"
