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
printf 'ResNet-18 (batch size 16)\tcmd\t-n\t1\t100\t6.5\t1\nResNet-18 (batch size 16)\tcmd\t-n\t1\t100\t7\t2\n' > "$corpus/trace/gavel.trace"
printf 'job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n0,4,0,1,m,100,0\n1,2,10,1,m,50,0\n' > "$corpus/trace/tiresias.csv"
printf 'name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\np0,1000,1024,1,500,A|B,LS,Running,0,100,0\n' > "$corpus/trace/pods.csv"
# HTTP heads: the first byte picks request (even) or response (odd).
mkdir -p "$corpus/httphead"
printf '0POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nContent-Type: application/json\r\nContent-Length: 49\r\n\r\n' > "$corpus/httphead/req"
printf '0GET /v2/models/tiny?x=1 HTTP/1.1\r\nHost: a\r\nX-Empty:\r\ntraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\n\r\n' > "$corpus/httphead/get"
printf '1HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Type: application/json\r\nContent-Length: 115\r\nConnection: keep-alive\r\n\r\n' > "$corpus/httphead/resp"
printf '1HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nRetry-After: 1\r\n\r\n' > "$corpus/httphead/resp503"
# Flag words: NUL-separated argv.
mkdir -p "$corpus/flags"
printf '%s\0' --listen 0.0.0.0:8080 --dur 1.5m --n -3 --f=0.05 file > "$corpus/flags/ok"
printf '%s\0' --body 4Mi --mode bb --on --i -9223372036854775808 --u 1000 > "$corpus/flags/more"
printf '%s\0' --f nan --n 2.7 --dur inf --text toolongtext --fn x > "$corpus/flags/bad"
# Request bodies the gateway scans.
mkdir -p "$corpus/jscan"
printf '{"model":"tiny","prompt":"hi","max_tokens":4,"stream":true}' > "$corpus/jscan/compl"
printf '{"model":"m","messages":[{"role":"user","content":"a\\u00e9\\n"}],"max_tokens":-3}' > "$corpus/jscan/chat"
printf '[1,2.5e3,null,false,{"a":[{}]}]' > "$corpus/jscan/array"
# KV blocks: odd first byte, a header is made for the rest.
mkdir -p "$corpus/kv"
printf '\001%s' 0123456701234567 > "$corpus/kv/made"
printf '\000SCKV' > "$corpus/kv/short"
# Responses to the async HTTP client (first byte: where a callback stops it).
mkdir -p "$corpus/hclient"
printf '\000HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: keep-alive\r\n\r\nhello' > "$corpus/hclient/len"
printf '\000HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n' > "$corpus/hclient/chunked"
printf '\002HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\ndata: x\n\n' > "$corpus/hclient/sse"
printf '\001HTTP/1.0 503 Busy\r\n\r\n' > "$corpus/hclient/close"
printf '\000HTTP/1.1 2 00\r\nContent-Length: 2\r\n\r\nok' > "$corpus/hclient/badstatus"
# Triton model configurations (protobuf text format).
mkdir -p "$corpus/pbtxt"
printf 'name: "tiny"\nbackend: "starcloud_llama2c"\nmax_batch_size: 8\nversion_policy: { latest { num_versions: 2 } }\n' > "$corpus/pbtxt/config"
printf 'input [ { name: "x" dims: [ -1, 3 ] } ]\nparameters { key: "k" value: { string_value: "\\x41\\101" } } # c\n' > "$corpus/pbtxt/more"
# kubectl-style JSONPath templates (-o jsonpath=).
mkdir -p "$corpus/jsonpath"
printf '{range .items[*]}{.metadata.name}{"\\t"}{.status.phase}{"\\n"}{end}' > "$corpus/jsonpath/range"
printf '{.items[?(@.spec.tasks[0].replicas>=2)].metadata.labels['"'"'x'"'"']} {..name} {.items[-1:]}' > "$corpus/jsonpath/filter"
pass=0 fail=0
for t in manifest trace httphead flags jscan kv hclient pbtxt jsonpath; do
	if "$build/fuzz_$t" -runs="$runs" -max_len=8192 -seed=1 "$corpus/$t" >"$corpus/$t.log" 2>&1; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1))
		tail -40 "$corpus/$t.log"
	fi
done
echo "fuzz: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
