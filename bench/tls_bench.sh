#!/usr/bin/env bash
# TLS cost on the control plane (make bench-tls): two `starcloud server`s on
# loopback, one plain and one with --tls-cert/--tls-key (a P-256 certificate
# from the openssl command), measured by wrk in the same run, alternating:
#   keep-alive:  wrk keeps BENCH_CONNS connections open (one TLS handshake
#                each): the cost of encrypting requests and answers;
#   new conn:    "Connection: close" on every request, so every request is a
#                new TCP connection and, for TLS, a full handshake (TLS 1.3,
#                X25519 + ECDSA P-256; wrk resumes no sessions): handshakes/s.
# Two paths: GET /healthz (no token, a few bytes) and GET /api/v1/queues
# (an admin token checked, an empty list). wrk uses one thread; the server
# is one process with one event loop. BENCH_ROUNDS rounds, each measuring
# plain and TLS back to back, in alternating order.
set -eu
BIN=${STARCLOUD_BIN:-build/starcloud}
DUR=${BENCH_SECONDS:-5}
CONNS=${BENCH_CONNS:-16}
ROUNDS=${BENCH_ROUNDS:-2}
T=$(mktemp -d)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
	rm -rf "$T"
}
trap cleanup EXIT
port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
wait_up() { for _ in $(seq 200); do curl -s -o /dev/null --cacert "$T/ca.pem" "$1" && return 0; sleep 0.05; done; echo "no answer from $1" >&2; exit 1; }

# A CA and a server certificate for 127.0.0.1 (P-256, as `starcloud dev`).
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/ca-key.pem" \
	-out "$T/ca.pem" -days 1 -subj "/CN=bench CA" 2>/dev/null
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/key.pem" \
	-out "$T/req.csr" -subj "/CN=127.0.0.1" 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1\n' > "$T/ext"
openssl x509 -req -in "$T/req.csr" -CA "$T/ca.pem" -CAkey "$T/ca-key.pem" -CAcreateserial \
	-out "$T/cert.pem" -days 1 -extfile "$T/ext" 2>/dev/null
chmod 600 "$T/key.pem"

start() { # name port extra...
	local name=$1 p=$2
	shift 2
	"$BIN" server --listen "127.0.0.1:$p" --data-dir "$T/$name" "$@" > "$T/$name.out" 2>&1 &
	PIDS+=($!)
	eval "${name}_PID=$!"
}
# The server's CPU time (user + system) in clock ticks: the rate a loaded
# machine gives is the machine's; the server's CPU per request is its own.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
PP=$(port)
TP=$(port)
start plain "$PP"
start tls "$TP" --tls-cert "$T/cert.pem" --tls-key "$T/key.pem"
wait_up "http://127.0.0.1:$PP/healthz"
wait_up "https://127.0.0.1:$TP/healthz"
tok() { grep -o 'sc_[0-9a-f]*' "$T/$1.out" | head -1; }
PTOK=$(tok plain)
TTOK=$(tok tls)
# wrk does not check certificates; curl checks that the TLS server is what
# we think it is (its certificate against our CA, its name).
curl -sf --cacert "$T/ca.pem" -H "Authorization: Bearer $TTOK" \
	"https://127.0.0.1:$TP/api/v1/queues" > /dev/null

rate() { awk '/Requests\/sec/ {print $2}' "$1"; }
total() { awk '/requests in/ {print $1}' "$1"; }
run() { # label url token extra-header
	local out="$T/run.wrk" pid t0
	case "$1" in plain*) pid=$plain_PID ;; *) pid=$tls_PID ;; esac
	t0=$(ticks "$pid")
	if [ -n "$4" ]; then
		wrk -t1 -c"$CONNS" -d"${DUR}s" -H "Authorization: Bearer $3" -H "$4" "$2" > "$out"
	else
		wrk -t1 -c"$CONNS" -d"${DUR}s" -H "Authorization: Bearer $3" "$2" > "$out"
	fi
	if grep -q "Non-2xx" "$out"; then
		echo "$1: non-2xx answers" >&2
		cat "$out" >&2
		exit 1
	fi
	# server CPU microseconds per request, then requests/s
	echo "$1 $(awk -v d=$(($(ticks "$pid") - t0)) -v n="$(total "$out")" -v hz="$(getconf CLK_TCK)" \
		'BEGIN {printf "%.1f", d * 1e6 / hz / n}') $(rate "$out")"
}
measure() { # scheme
	local base tok
	if [ "$1" = plain ]; then base="http://127.0.0.1:$PP" tok=$PTOK; else base="https://127.0.0.1:$TP" tok=$TTOK; fi
	run "$1 healthz keep-alive" "$base/healthz" "$tok" ""
	run "$1 healthz new-conn" "$base/healthz" "$tok" "Connection: close"
	run "$1 queues keep-alive" "$base/api/v1/queues" "$tok" ""
	run "$1 queues new-conn" "$base/api/v1/queues" "$tok" "Connection: close"
}
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
	"wrk -t1 -c$CONNS -d${DUR}s, $ROUNDS rounds"
for r in $(seq "$ROUNDS"); do
	if [ $((r % 2)) -eq 1 ]; then order="plain tls"; else order="tls plain"; fi
	for s in $order; do measure "$s"; done
done | tee "$T/all"
med() { grep "^$1 " "$T/all" | awk -v f="$2" '{print $(NF - f)}' | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "# medians of the rounds: requests/s, and the server's CPU microseconds per request"
for what in "healthz keep-alive" "healthz new-conn" "queues keep-alive" "queues new-conn"; do
	awk -v w="$what" -v p="$(med "plain $what" 0)" -v t="$(med "tls $what" 0)" \
		-v pc="$(med "plain $what" 1)" -v tc="$(med "tls $what" 1)" \
		'BEGIN {printf "%-20s plain %8.0f/s %7.1f us   tls %8.0f/s %7.1f us   rate tls/plain %.2f\n", w, p, pc, t, tc, t / p}'
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
