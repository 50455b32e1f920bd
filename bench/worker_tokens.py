"""Tokens per second of `starcloud worker` on one checkpoint: best of three
/v1/completions requests of N tokens. Usage: worker_tokens.py BIN CHECKPOINT N"""
import json, subprocess, sys, time, socket, requests, os
BIN = sys.argv[1]; ck = sys.argv[2]; n = int(sys.argv[3])
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
p = subprocess.Popen([BIN, "worker", "--checkpoint", ck, "--listen", "127.0.0.1:%d" % port, "--max-tokens", str(n)], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
url = "http://127.0.0.1:%d" % port
for _ in range(100):
    try:
        requests.get(url + "/v2/health/live", timeout=0.5); break
    except Exception: time.sleep(0.05)
best = 0
for _ in range(3):
    t = time.time()
    r = requests.post(url + "/v1/completions", json={"prompt": "Once upon a time", "max_tokens": n}).json()
    dt = time.time() - t
    best = max(best, r["usage"]["completion_tokens"] / dt)
print("tokens/s %.0f (%d tokens, prompt %d)" % (best, r["usage"]["completion_tokens"], r["usage"]["prompt_tokens"]))
p.terminate(); p.wait()
