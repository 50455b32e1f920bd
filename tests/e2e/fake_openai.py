"""A small OpenAI-compatible server standing in for vLLM or llama.cpp's
server behind the gateway (`--backend ...,kind=openai`): a real HTTP/1.1
server with keep-alive and chunked server-sent events, serving one model
under its own name, without Starcloud's extensions (no token_ids in its
chunks, no generated_ids, no KServe, no prefill/decode).

  GET  /health                 200 (503 with --unready)
  GET  /v1/models              the one model
  POST /v1/completions         "w<i> " tokens, streamed or not
  POST /v1/chat/completions    the same as chat
  POST /v1/embeddings          a fixed 4-float vector per input

Every POST is recorded and served back by GET /debug/requests, so a test can
check exactly what the gateway sent. Faults: --die-after-chunks N exits in
the middle of a stream. Run: python3 fake_openai.py --port N --name NAME."""
import argparse
import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ARGS = None
LOCK = threading.Lock()
SEEN = []


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send_json(self, status, obj):
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def error(self, status, msg, param=None):
        self.send_json(status, {"error": {"message": msg, "type": "invalid_request_error",
                                          "param": param, "code": None}})

    def chunk(self, data):
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def do_GET(self):
        if self.path == "/health":
            self.send_json(503 if ARGS.unready else 200, {})
        elif self.path == "/v1/models":
            self.send_json(200, {"object": "list", "data": [
                {"id": ARGS.name, "object": "model", "created": 0, "owned_by": "fake"}]})
        elif self.path == "/debug/requests":
            with LOCK:
                self.send_json(200, list(SEEN))
        else:
            self.error(404, "no such path")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        try:
            b = json.loads(self.rfile.read(n) or b"{}")
        except ValueError:
            return self.error(400, "bad json")
        with LOCK:
            SEEN.append({"path": self.path, "body": b})
        if b.get("model") != ARGS.name:
            return self.error(404, "The model `%s` does not exist." % b.get("model"), "model")
        if self.path == "/v1/embeddings":
            inputs = b["input"] if isinstance(b["input"], list) else [b["input"]]
            return self.send_json(200, {"object": "list", "model": ARGS.name, "data": [
                {"object": "embedding", "index": i, "embedding": [0.5, 0.5, 0.5, 0.5]}
                for i in range(len(inputs))],
                "usage": {"prompt_tokens": len(inputs), "total_tokens": len(inputs)}})
        chat = self.path == "/v1/chat/completions"
        if self.path not in ("/v1/completions", "/v1/chat/completions"):
            return self.error(404, "no such path")
        count = b.get("max_completion_tokens") or b.get("max_tokens") or 8
        words = ["w%d " % i for i in range(count)]
        if not b.get("stream"):
            text = "".join(words)
            choice = ({"index": 0, "message": {"role": "assistant", "content": text},
                       "finish_reason": "length"} if chat else
                      {"index": 0, "text": text, "finish_reason": "length", "logprobs": None})
            return self.send_json(200, {
                "id": "x", "object": "chat.completion" if chat else "text_completion",
                "created": 0, "model": ARGS.name, "choices": [choice],
                "usage": {"prompt_tokens": 2, "completion_tokens": count,
                          "total_tokens": 2 + count}})
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        for i, w in enumerate(words):
            if ARGS.die_after_chunks and i == ARGS.die_after_chunks:
                os._exit(3)
            delta = {"content": w}
            c = ({"index": 0, "delta": delta, "finish_reason": None} if chat else
                 {"index": 0, "text": w, "finish_reason": None, "logprobs": None})
            ev = {"id": "x", "object": "chat.completion.chunk" if chat else "text_completion",
                  "created": 0, "model": ARGS.name, "choices": [c]}
            self.chunk(b"data: " + json.dumps(ev).encode() + b"\n\n")
            time.sleep(0.01)
        last = ({"index": 0, "delta": {}, "finish_reason": "length"} if chat else
                {"index": 0, "text": "", "finish_reason": "length"})
        self.chunk(b"data: " + json.dumps({"id": "x", "object": "x", "created": 0,
                                           "model": ARGS.name, "choices": [last]}).encode() +
                   b"\n\n")
        self.chunk(b"data: [DONE]\n\n")
        self.chunk(b"")


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--name", default="org/fake-1b")
    ap.add_argument("--die-after-chunks", type=int, default=0)
    ap.add_argument("--unready", action="store_true")
    ARGS = ap.parse_args()
    srv = ThreadingHTTPServer(("127.0.0.1", ARGS.port), Handler)
    srv.daemon_threads = True
    srv.serve_forever()


if __name__ == "__main__":
    main()
