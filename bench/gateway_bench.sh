#!/usr/bin/env bash
# Gateway benchmark (make bench-gateway): throughput and added latency of
# `starcloud gateway` against nginx proxying to the same backends, failover
# after a replica crash, and canary rollback time. Everything on loopback;
# backends are nginx instances answering a fixed completion (so the figures
# measure the proxies, not a model). Needs wrk and nginx (scripts/deps.sh).
#
# Fairness: the gateway is one process with one event loop, so the nginx
# proxy gets one worker process (worker_processes 1); both keep connections
# to the same two backends alive (nginx: upstream keepalive 128 with HTTP/1.1
# and no Connection header; the gateway: its pool, 256 idle per backend) and
# balance by least outstanding requests. The backends are the same processes
# for both. wrk uses one thread and BENCH_CONNS connections.
#
# STARCLOUD_BIN_B=path runs a second gateway binary (say, the one before a
# change) in the same run: every repetition measures both gateways and nginx,
# in an order that alternates, so an A/B comparison sees the same load.
set -eu
BIN=${STARCLOUD_BIN:-build/starcloud}
BIN_B=${STARCLOUD_BIN_B:-}
DUR=${BENCH_SECONDS:-5}
CONNS=${BENCH_CONNS:-32}
T=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 100); do curl -s -o /dev/null "$1" && return 0; sleep 0.05; done; echo "no answer from $1" >&2; exit 1; }

# One nginx per backend so that one can be killed alone. Without a master
# process: the pid is the process that serves, so the failover test's
# SIGKILL really takes the backend down (killing a master leaves its worker
# serving, orphaned).
backend() { # name port status
	mkdir -p "$T/$1"
	cat > "$T/$1/nginx.conf" <<CONF
master_process off; daemon off; pid $T/$1/nginx.pid; error_log $T/$1/error.log;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $T/$1; proxy_temp_path $T/$1;
  fastcgi_temp_path $T/$1; uwsgi_temp_path $T/$1; scgi_temp_path $T/$1;
  server { listen 127.0.0.1:$2; keepalive_requests 1000000;
    location / { default_type application/json;
      return $3 '{"id":"c","object":"text_completion","model":"bench","choices":[{"index":0,"text":"t0 ","finish_reason":"length"}]}'; } } }
CONF
	nginx -c "$T/$1/nginx.conf" -e "$T/$1/error.log" & PIDS+=($!); eval "$1_PID=$!"
	wait_up "http://127.0.0.1:$2/"
}
B1=$(port); B2=$(port); BAD=$(port); GW=$(port); NG=$(port); GW2=$(port); GWB=$(port)
backend b1 "$B1" 200; backend b2 "$B2" 200; backend bad "$BAD" 500

"$BIN" gateway --listen 127.0.0.1:$GW --probe-interval 0 \
	--backend model=bench,version=1,url=http://127.0.0.1:$B1 \
	--backend model=bench,version=1,url=http://127.0.0.1:$B2 2>"$T/gw.log" & PIDS+=($!); GPID=$!
TARGETS="gateway nginx"
if [ -n "$BIN_B" ]; then
	"$BIN_B" gateway --listen 127.0.0.1:$GWB --probe-interval 0 \
		--backend model=bench,version=1,url=http://127.0.0.1:$B1 \
		--backend model=bench,version=1,url=http://127.0.0.1:$B2 2>"$T/gwb.log" & PIDS+=($!); GBPID=$!
	TARGETS="gateway gateway_b nginx"
	wait_up "http://127.0.0.1:$GWB/healthz"
fi
mkdir -p "$T/px"
cat > "$T/px/nginx.conf" <<CONF
worker_processes 1; daemon off; pid $T/px/nginx.pid; error_log $T/px/error.log;
events { worker_connections 4096; }
http { access_log off; client_body_temp_path $T/px; proxy_temp_path $T/px;
  fastcgi_temp_path $T/px; uwsgi_temp_path $T/px; scgi_temp_path $T/px;
  upstream be { least_conn; server 127.0.0.1:$B1; server 127.0.0.1:$B2; keepalive 128; }
  server { listen 127.0.0.1:$NG; keepalive_requests 1000000;
    location / { proxy_pass http://be; proxy_http_version 1.1; proxy_set_header Connection ""; } } }
CONF
nginx -c "$T/px/nginx.conf" -e "$T/px/error.log" & PIDS+=($!); NPX=$!
wait_up "http://127.0.0.1:$GW/healthz"; wait_up "http://127.0.0.1:$NG/"
NWK=$(pgrep -P "$NPX" | head -1)
# CPU time (user + system, clock ticks) of a process: per request it is a
# figure the machine's load does not distort the way throughput is.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

cat > "$T/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"bench","prompt":"hello","max_tokens":1}'
wrk.headers["Content-Type"] = "application/json"
LUA
run() { # label url -> "req/s p50_ms p99_ms"
	wrk -t1 -c"$CONNS" -d"${DUR}s" --latency -s "$T/post.lua" "$2/v1/completions" > "$T/$1.wrk"
	/usr/bin/python3 - "$T/$1.wrk" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
def ms(pat):
    # wrk prints us, ms, s, m; a run that completed nothing prints no value.
    m = re.search(pat + r"\s+([\d.]+)(us|ms|s|m)\b", t)
    if not m:
        sys.stderr.write("wrk output not understood:\n" + t[:2000])
        return float("nan")
    return float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[m.group(2)]
r = re.search(r"Requests/sec:\s+([\d.]+)", t)
rps = float(r.group(1)) if r else float("nan")
p50 = ms("50%"); p99 = ms("99%")
errs = re.search(r"Non-2xx or 3xx responses: (\d+)", t)
print("%.0f %.3f %.3f %s" % (rps, p50, p99, errs.group(1) if errs else 0))
PY
}
# Gateway and nginx alternate, BENCH_REPS times, so that a change in the
# machine's load touches both alike; every repetition is printed, then the
# medians.
REPS=${BENCH_REPS:-3}
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r D_RPS D_P50 D_P99 _ <<<"$(run direct http://127.0.0.1:$B1)"
echo "== throughput, $DUR s per run, wrk -t1 -c$CONNS, small POST /v1/completions, $REPS repetitions"
[ -n "$BIN_B" ] && echo "gateway = $BIN, gateway_b = $BIN_B"
printf "%-10s %4s %10s %9s %9s %6s %10s %s\n" target rep req/s p50_ms p99_ms non2xx us_cpu/req load1
printf "%-10s %4s %10s %9s %9s\n" direct - "$D_RPS" "$D_P50" "$D_P99"
: > "$T/rows"
for rep in $(seq "$REPS"); do
	# Odd repetitions run the targets in order, even ones in reverse, so
	# that neither proxy always follows the other.
	order=$TARGETS
	[ $((rep % 2)) = 0 ] && order=$(echo "$TARGETS" | tr ' ' '\n' | tac | tr '\n' ' ')
	for tgt in $order; do
		url=http://127.0.0.1:$GW pid=$GPID
		[ "$tgt" = nginx ] && url=http://127.0.0.1:$NG pid=$NWK
		[ "$tgt" = gateway_b ] && url=http://127.0.0.1:$GWB pid=$GBPID
		c0=$(ticks "$pid")
		read -r rps p50 p99 err <<<"$(run "$tgt$rep" "$url")"
		c1=$(ticks "$pid")
		cpu=$(/usr/bin/python3 -c "import os; print('%.1f' % (($c1 - $c0) / os.sysconf('SC_CLK_TCK') / max($rps * $DUR, 1) * 1e6))")
		printf "%-10s %4s %10s %9s %9s %6s %10s %s\n" "$tgt" "$rep" "$rps" "$p50" "$p99" "$err" "$cpu" "$(cut -d' ' -f1 /proc/loadavg)"
		echo "$tgt $rps $p50 $p99 $cpu" >> "$T/rows"
	done
done
/usr/bin/python3 - "$T/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
import math
targets = [t for t in ("gateway", "gateway_b", "nginx") if any(r[0] == t for r in rows)]
med = {t: [statistics.median(v for v in (float(r[i]) for r in rows if r[0] == t)
                             if not math.isnan(v)) for i in (1, 2, 3, 4)]
       for t in targets}
for t, (rps, p50, p99, cpu) in med.items():
    print("median %-9s %8.0f req/s  p50 %.3f ms  p99 %.3f ms  %.1f us CPU/request" % (
        t, rps, p50, p99, cpu))
for t in targets[:-1]:
    # Per repetition too: the runs of one repetition saw the same load.
    k = len(targets)
    reps = [float(a[1]) / float(b[1]) for i, a in enumerate(rows) if a[0] == t
            for j, b in enumerate(rows) if b[0] == "nginx" and i // k == j // k]
    print("%s / nginx throughput: %.2f (per repetition: %s), CPU per request: %.2f" % (
        t, med[t][0] / med["nginx"][0], " ".join("%.2f" % x for x in reps),
        med[t][3] / med["nginx"][3]))
PY
# Added latency at light load (one connection), where queueing does not hide it.
CONNS=1
echo "== added latency at 1 connection (proxy minus direct, medians of $REPS), ms"
: > "$T/rows1"
for rep in $(seq "$REPS"); do
	read -r d1 d50 d99 _ <<<"$(run direct1 http://127.0.0.1:$B1)"
	read -r g1 g50 g99 _ <<<"$(run gateway1 http://127.0.0.1:$GW)"
	read -r n1 n50 n99 _ <<<"$(run nginx1 http://127.0.0.1:$NG)"
	b1=0 b50=0 b99=0
	[ -n "$BIN_B" ] && read -r b1 b50 b99 _ <<<"$(run gatewayb1 http://127.0.0.1:$GWB)"
	echo "$d50 $d99 $g50 $g99 $n50 $n99 $g1 $n1 $b50 $b99 $b1" >> "$T/rows1"
done
/usr/bin/python3 - "$T/rows1" <<'PY'
import statistics, sys
rows = [[float(x) for x in l.split()] for l in open(sys.argv[1])]
m = lambda i: statistics.median(r[i] for r in rows)
gp50 = [r[2] - r[0] for r in rows]; gp99 = [r[3] - r[1] for r in rows]
np50 = [r[4] - r[0] for r in rows]; np99 = [r[5] - r[1] for r in rows]
print("gateway: p50 +%.3f  p99 +%.3f  (%.0f req/s)  per run p99: %s" % (
    statistics.median(gp50), statistics.median(gp99), m(6), " ".join("%+.3f" % x for x in gp99)))
print("nginx:   p50 +%.3f  p99 +%.3f  (%.0f req/s)  per run p99: %s" % (
    statistics.median(np50), statistics.median(np99), m(7), " ".join("%+.3f" % x for x in np99)))
if any(r[10] for r in rows):
    bp50 = [r[8] - r[0] for r in rows]; bp99 = [r[9] - r[1] for r in rows]
    print("gateway_b: p50 +%.3f  p99 +%.3f  (%.0f req/s)  per run p99: %s" % (
        statistics.median(bp50), statistics.median(bp99), m(10), " ".join("%+.3f" % x for x in bp99)))
PY
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

# Failover: steady load through the gateway, one backend killed at 1 s.
echo "== failover: 8 clients, backend killed after 1 s, 3 s run"
/usr/bin/python3 - "http://127.0.0.1:$GW" "$b1_PID" <<'PY'
import os, signal, sys, threading, time, requests
url, pid = sys.argv[1], int(sys.argv[2])
res, stop = [], time.time() + 3
def load():
    s = requests.Session()
    while time.time() < stop:
        t0 = time.time()
        try:
            c = s.post(url + "/v1/completions", json={"model": "bench", "prompt": "x"}, timeout=5).status_code
        except Exception:
            c = 0
        res.append((t0, time.time() - t0, c))
ts = [threading.Thread(target=load) for _ in range(8)]
[t.start() for t in ts]
time.sleep(1); kill_at = time.time(); os.kill(pid, signal.SIGKILL)
[t.join() for t in ts]
after = [r for r in res if r[0] + r[1] >= kill_at]
bad = [r for r in res if r[2] != 200]
print("requests %d, failed %d, slowest request around the crash %.1f ms, "
      "first success after the crash %.1f ms" % (len(res), len(bad),
      1000 * max(r[1] for r in after), 1000 * (min(r[0] + r[1] for r in after if r[2] == 200) - kill_at)))
PY

# Rollback: canary answering 500 to everything, 1 s analysis window.
"$BIN" gateway --listen 127.0.0.1:$GW2 --probe-interval 0 \
	--backend model=bench,version=1,url=http://127.0.0.1:$B2 \
	--backend model=bench,version=2,url=http://127.0.0.1:$BAD \
	--rollout model=bench,stable=1,canary=2,window=1s 2>"$T/gw2.log" & PIDS+=($!)
wait_up "http://127.0.0.1:$GW2/healthz"
echo "== rollback: canary with 100 % errors at 10 %, window 1 s"
/usr/bin/python3 - "http://127.0.0.1:$GW2" <<'PY'
import sys, time, requests
url = sys.argv[1]; s = requests.Session(); t0 = time.time(); n = bad = 0
while time.time() - t0 < 10:
    n += 1; bad += s.post(url + "/v1/completions", json={"model": "bench", "prompt": "x"}).status_code != 200
    if n % 20 == 0 and s.get(url + "/admin/rollouts/bench").json()["state"] == "rolled_back":
        break
print("rolled back after %.2f s; %d of %d requests failed (%.1f %%)" % (time.time() - t0, bad, n, 100.0 * bad / n))
PY
echo "machine: $(nproc) cores, $(uname -sr), $(date -u +%Y-%m-%d)"
