"""A small model worker for gateway tests: a real HTTP/1.1 server (keep-alive,
chunked server-sent events) speaking the OpenAI, KServe v2 and prefill/decode
protocols of docs/WORKER.md, with faults on demand.

Generation is deterministic: token i is the text "t<i> " with id 100+i. A
request with generated_ids (a resumed stream) continues after that many
tokens, as a real worker does. Run: python3 fakeworker.py --port N [--role both|prefill|decode]
[--version V] [--fail-rate F] [--fail-status S] [--latency-ms MS]
[--die-after-chunks N] [--unready]."""
import argparse
import json
import os
import random
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
COUNTERS = {"requests": 0, "completions": 0, "prefills": 0, "decodes": 0, "infers": 0,
            "failed": 0}
TRACEPARENTS = []
DECODE_BODIES = []
KV = {}


def count(key):
    with LOCK:
        COUNTERS[key] += 1



class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    # ---- helpers ----
    def send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("x-starcloud-replica", "127.0.0.1:%d" % ARGS.port)
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, msg, field=""):
        self.send_json(status, {"error": {"message": msg, "type": "invalid_request_error",
                                          "param": field or None, "code": None}})

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b""
        return json.loads(raw or b"{}")

    def maybe_fail(self):
        if ARGS.fail_rate and random.random() < ARGS.fail_rate:
            count("failed")
            self.error(ARGS.fail_status, "injected failure")
            return True
        return False

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def stream(self, events, die_after=0):
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i, ev in enumerate(events):
            if die_after and i == die_after:
                os._exit(3)  # a crash mid-stream: the connection just drops
            self.chunk(b"data: " + json.dumps(ev).encode() + b"\n\n")
            time.sleep(0.01)
        self.chunk(b"data: [DONE]\n\n")
        self.chunk(b"")

    # ---- generation ----
    def choices(self, kind, start, n, first=True):
        out = []
        for i in range(start, start + n):
            text = "t%d " % i
            if kind == "chat":
                c = {"index": 0, "delta": {"content": text}, "finish_reason": None,
                     "token_ids": [100 + i]}
                if first and i == start:
                    c["delta"]["role"] = "assistant"
            else:
                c = {"index": 0, "text": text, "finish_reason": None, "token_ids": [100 + i]}
            out.append(c)
        if out:
            out[-1]["finish_reason"] = "length"
        return out

    def answer(self, kind, start, n, stream, model):
        obj = "chat.completion" if kind == "chat" else "text_completion"
        if stream:
            evs = [{"id": "cmpl-1", "object": obj + (".chunk" if kind == "chat" else ""),
                    "created": int(time.time()), "model": model, "choices": [c]}
                   for c in self.choices(kind, start, n)]
            self.stream(evs, ARGS.die_after_chunks)
            return
        text = "".join("t%d " % i for i in range(start, start + n))
        if kind == "chat":
            choice = {"index": 0, "message": {"role": "assistant", "content": text},
                      "finish_reason": "length"}
        else:
            choice = {"index": 0, "text": text, "finish_reason": "length", "logprobs": None}
        self.send_json(200, {"id": "cmpl-1", "object": obj, "created": int(time.time()),
                             "model": model, "choices": [choice],
                             "usage": {"prompt_tokens": 3, "completion_tokens": n,
                                       "total_tokens": 3 + n}})

    # ---- routes ----
    def do_GET(self):
        count("requests")
        if self.path == "/v2/health/ready":
            self.send_json(503 if ARGS.unready else 200, {})
        elif self.path == "/v2/health/live":
            self.send_json(200, {})
        elif self.path == "/debug/counters":
            with LOCK:
                self.send_json(200, dict(COUNTERS, traceparents=TRACEPARENTS[-50:],
                                         decode_bodies=DECODE_BODIES[-10:]))
        elif self.path.startswith("/v1/kv/"):
            h = self.path[len("/v1/kv/"):]
            if h not in KV:
                self.error(404, "no such handle", "kv_handle")
                return
            data = json.dumps(KV[h]).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        elif self.path.startswith("/v2/models/"):
            self.send_json(200, {"name": ARGS.model, "versions": [ARGS.version],
                                 "platform": "fake", "inputs": [], "outputs": []})
        else:
            self.error(404, "no such path")

    def do_DELETE(self):
        h = self.path[len("/v1/kv/"):]
        KV.pop(h, None)
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self):
        count("requests")
        tp = self.headers.get("traceparent")
        if tp:
            with LOCK:
                TRACEPARENTS.append(tp)
        try:
            b = self.body()
        except ValueError:
            self.error(400, "bad json")
            return
        if ARGS.latency_ms:
            time.sleep(ARGS.latency_ms / 1000.0)
        p = self.path
        role_ok = {"both": ("/v1/completions", "/v1/chat/completions", "/v2/models/"),
                   "prefill": ("/v1/prefill",), "decode": ("/v1/decode",)}[ARGS.role]
        if not p.startswith(role_ok):
            self.error(404, "not served by this role", "role")
            return
        if self.maybe_fail():
            return
        if p in ("/v1/completions", "/v1/chat/completions"):
            count("completions")
            kind = "chat" if "chat" in p else "completion"
            # generated_ids: the tokens the client already has (a resumed
            # stream); they count towards max_tokens, as on a real worker.
            start = len(b.get("generated_ids") or [])
            n = b.get("max_tokens") or 8
            self.answer(kind, start, n - start, b.get("stream", False), b.get("model", ""))
        elif p.endswith("/infer"):
            count("infers")
            inp = b["inputs"][0]
            self.send_json(200, {"model_name": ARGS.model, "model_version": ARGS.version,
                                 "id": b.get("id", "1"),
                                 "outputs": [{"name": "output0", "shape": inp["shape"],
                                              "datatype": inp["datatype"],
                                              "data": [x * 2 for x in inp["data"]]}]})
        elif p == "/v1/prefill":
            count("prefills")
            h = "kv-%d-%d" % (ARGS.port, COUNTERS["prefills"])
            KV[h] = {"prompt": b.get("prompt") or b.get("messages")}
            self.send_json(200, {"kv_handle": h,
                                 "kv_url": "http://127.0.0.1:%d/v1/kv/%s" % (ARGS.port, h),
                                 "first_token": 100, "n_tokens": 3, "lease_ms": 30000,
                                 "model": ARGS.model})
        elif p == "/v1/decode":
            count("decodes")
            with LOCK:
                DECODE_BODIES.append(b)
            try:
                urllib.request.urlopen(b["kv_url"], timeout=2).read()
            except Exception:
                self.error(502, "cannot fetch the KV cache", "kv_url")
                return
            skip = 1 + len(b.get("generated_ids", []))
            n = (b.get("max_tokens") or 8)
            kind = "chat" if b.get("format") == "chat" else "completion"
            start = 0 if skip == 1 and not b.get("generated_ids") else skip
            self.answer(kind, start, n - start, b.get("stream", False), b.get("model", ""))


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--role", default="both")
    ap.add_argument("--model", default="tiny")
    ap.add_argument("--version", default="1")
    ap.add_argument("--fail-rate", type=float, default=0)
    ap.add_argument("--fail-status", type=int, default=500)
    ap.add_argument("--latency-ms", type=int, default=0)
    ap.add_argument("--die-after-chunks", type=int, default=0)
    ap.add_argument("--unready", action="store_true")
    ARGS = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    srv.daemon_threads = True
    print("ready", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
