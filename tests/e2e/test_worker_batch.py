"""The worker's continuous batching, cancellation, and the OpenAI fields it
honours beyond the basics (n, prompt arrays, logprobs, usage in streams,
max_completion_tokens, content parts, the developer role, embeddings,
models.retrieve, resumed answers)."""
import base64
import json
import math
import socket
import struct
import threading
import time

import pytest
import requests

from conftest import wait_for
from test_worker import Worker, spawn, sse_events  # noqa: F401 (fixtures)


def compl(w, **body):
    r = w.post("/v1/completions", body)
    assert r.status_code == 200, r.text
    return r.json()


# ---------------------------------------------------------------------------
# Batching
# ---------------------------------------------------------------------------

def test_concurrent_requests_share_steps_and_answer_as_alone(slow_ckpt, tmp_path):
    """Sixteen requests at once are computed in shared forward steps, and
    each answer is exactly the one it gets alone (batching changes no
    token: the arithmetic per token does not depend on the batch). The slow
    checkpoint, so that each answer takes long enough for all sixteen to be
    in flight together however unevenly the threads start on a loaded
    machine (with the tiny one a run once saw 598 items in 302 steps)."""
    w = Worker(slow_ckpt, "--max-batch", "16", tmp=tmp_path)
    try:
        bodies = [{"prompt": "story %d about" % i, "max_tokens": 24, "temperature": 0.7 * (i % 2),
                   "seed": i} for i in range(16)]
        alone = [compl(w, **b)["choices"][0]["token_ids"] for b in bodies]
        before = w.counters()
        out = [None] * 16

        def one(i):
            out[i] = compl(w, **bodies[i])["choices"][0]["token_ids"]
        threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert out == alone
        after = w.counters()
        steps = after["batch_steps"] - before["batch_steps"]
        items = after["batch_items"] - before["batch_items"]
        # 16 x 24 tokens and 16 prompts in fewer steps than one request alone
        # would need for its share: sequences shared steps.
        assert items >= 16 * 23
        assert items / steps > 2, (items, steps)
    finally:
        w.stop()


def test_short_request_not_stuck_behind_long_one(slow_ckpt, tmp_path):
    w = Worker(slow_ckpt, "--max-tokens", "400", tmp=tmp_path)
    try:
        got = []
        done = threading.Event()

        def long_stream():
            with requests.post(w.url + "/v1/completions", stream=True, timeout=120,
                               json={"prompt": "a long one", "max_tokens": 400,
                                     "stream": True}) as r:
                for line in r.iter_lines():
                    if line.startswith(b"data: {"):
                        got.append(1)
            done.set()
        t = threading.Thread(target=long_stream)
        t.start()
        wait_for(lambda: len(got) >= 3, what="the long stream to start")
        r = w.post("/v1/completions", {"prompt": "hi", "max_tokens": 5}, timeout=120)
        assert r.status_code == 200
        # The short answer is complete while the long one still streams.
        assert not done.is_set(), "the short request waited for the long one"
        assert len(got) < 400
        t.join()
    finally:
        w.stop()


def test_client_gone_cancels_and_frees_kv(slow_ckpt, tmp_path):
    """A client that goes away (streamed or not) cancels its generation at
    once: no sequence keeps running, the KV caches are freed, and the next
    request is served at once."""
    w = Worker(slow_ckpt, "--max-tokens", "400", tmp=tmp_path)
    try:
        for stream in (True, False):
            s = socket.create_connection(("127.0.0.1", w.port), timeout=10)
            body = json.dumps({"prompt": "x", "max_tokens": 400, "stream": stream}).encode()
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))
            wait_for(lambda: w.counters()["sequences_running"] == 1, what="the request to run")
            wait_for(lambda: w.counters()["kv_cache_bytes"] > 0, what="a KV cache")
            s.close()
            c = wait_for(lambda: (lambda c: c if c["sequences_running"] == 0 else None)(
                w.counters()), what="the cancellation")
            assert c["kv_cache_bytes"] == 0
        c = w.counters()
        assert c["cancelled"] == 2
        gen = c["tokens_generated"]
        time.sleep(0.3)
        assert w.counters()["tokens_generated"] == gen  # nothing runs for nobody
        assert w.post("/v1/completions", {"prompt": "next", "max_tokens": 3}).status_code == 200
    finally:
        w.stop()


def test_queue_full_is_429(slow_ckpt, tmp_path):
    w = Worker(slow_ckpt, "--max-tokens", "400", "--max-batch", "1", "--max-batch-tokens", "8",
               "--max-queue", "1", tmp=tmp_path)
    socks = []
    try:
        for _ in range(2):  # one runs, one waits
            s = socket.create_connection(("127.0.0.1", w.port), timeout=10)
            body = json.dumps({"prompt": "x", "max_tokens": 400}).encode()
            s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s"
                      % (len(body), body))
            socks.append(s)
        wait_for(lambda: w.counters()["sequences_waiting"] == 1, what="a waiting request")
        r = w.post("/v1/completions", {"prompt": "y", "max_tokens": 2})
        assert r.status_code == 429 and r.headers.get("Retry-After") == "1"
        assert r.json()["error"]["type"] == "rate_limit_error"
        assert w.counters()["queue_full"] == 1
    finally:
        for s in socks:
            s.close()
        w.stop()


# ---------------------------------------------------------------------------
# OpenAI fields
# ---------------------------------------------------------------------------

def test_n_and_prompt_arrays(spawn):
    w = spawn()
    one = compl(w, prompt="abc", max_tokens=6)["choices"][0]
    r = compl(w, prompt=["abc", "xyz"], n=3, max_tokens=6, temperature=1.0, seed=5)
    assert [c["index"] for c in r["choices"]] == list(range(6))
    texts = [c["text"] for c in r["choices"]]
    assert len(set(texts[:3])) > 1  # choices of one prompt differ when sampling
    # Choice 0 of a prompt keeps the request's seed: as a request of its own.
    alone = compl(w, prompt="xyz", max_tokens=6, temperature=1.0, seed=5)["choices"][0]
    assert r["choices"][3]["text"] == alone["text"]
    assert r["usage"]["prompt_tokens"] == 2 * 4  # each prompt counted once
    assert r["usage"]["completion_tokens"] == 36
    g = compl(w, prompt=["abc", [1, 100, 101, 102]], max_tokens=6)
    assert g["choices"][0]["text"] == one["text"] == g["choices"][1]["text"]
    # Streamed: every choice has its chunks and its own finish.
    r = w.post("/v1/completions", {"prompt": "abc", "n": 2, "max_tokens": 4, "stream": True,
                                   "temperature": 1.0})
    chunks, done = sse_events(r)
    assert done
    fins = [c["choices"][0] for c in chunks if c["choices"][0]["finish_reason"]]
    assert sorted(f["index"] for f in fins) == [0, 1]
    chat = w.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                           "n": 2, "max_tokens": 3}).json()
    assert [c["index"] for c in chat["choices"]] == [0, 1]


def test_max_completion_tokens_content_parts_developer(spawn):
    w = spawn()
    r = compl(w, prompt="abc", max_completion_tokens=3)
    assert r["usage"]["completion_tokens"] == 3
    # max_completion_tokens wins over the older max_tokens.
    assert compl(w, prompt="abc", max_tokens=9, max_completion_tokens=2)["usage"][
        "completion_tokens"] == 2
    a = w.post("/v1/chat/completions", {"messages": [
        {"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}],
        "max_completion_tokens": 8}).json()
    b = w.post("/v1/chat/completions", {"messages": [
        {"role": "developer", "content": [{"type": "text", "text": "be "},
                                          {"type": "text", "text": "brief"}]},
        {"role": "user", "content": [{"type": "text", "text": "hi there"}]},
        {"role": "assistant", "content": None, "tool_calls": []}][:2],
        "max_completion_tokens": 8}).json()
    assert a["choices"][0]["message"] == b["choices"][0]["message"]
    assert a["usage"] == b["usage"]


def test_logprobs(spawn):
    w = spawn()
    r = compl(w, prompt="abc", max_tokens=5, logprobs=3)["choices"][0]
    lp = r["logprobs"]
    assert len(lp["tokens"]) == len(lp["token_logprobs"]) == len(lp["top_logprobs"]) == 5
    assert lp["text_offset"] == sorted(lp["text_offset"]) and lp["text_offset"][0] == 0
    for chosen, top in zip(lp["token_logprobs"], lp["top_logprobs"]):
        vals = sorted(top.values(), reverse=True)
        assert chosen <= 0 and len(top) <= 3
        assert abs(chosen - vals[0]) < 1e-6  # greedy: the chosen token is the most likely
        assert sum(math.exp(v) for v in vals) <= 1 + 1e-6
    # Streamed chunks carry the same numbers.
    s = w.post("/v1/completions", {"prompt": "abc", "max_tokens": 5, "logprobs": 3,
                                   "stream": True})
    chunks, _ = sse_events(s)
    streamed = [c["choices"][0]["logprobs"]["token_logprobs"][0] for c in chunks
                if c["choices"][0]["logprobs"]]
    assert streamed == lp["token_logprobs"]
    # Chat: logprobs + top_logprobs; sampling does not change the model's numbers.
    c = w.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                        "max_tokens": 4, "logprobs": True, "top_logprobs": 2,
                                        "temperature": 1.5, "seed": 3}).json()["choices"][0]
    content = c["logprobs"]["content"]
    assert len(content) == 4
    for e in content:
        assert set(e) == {"token", "logprob", "bytes", "top_logprobs"}
        assert len(e["top_logprobs"]) == 2 and e["logprob"] <= e["top_logprobs"][0]["logprob"]
        assert bytes(e["bytes"]).decode("utf-8", "replace") or True
    n = w.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                        "max_tokens": 2}).json()["choices"][0]
    assert n["logprobs"] is None


def test_usage_in_streams_only_when_asked(spawn):
    w = spawn()
    for path, body in (("/v1/completions", {"prompt": "abc"}),
                       ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}]})):
        body = dict(body, max_tokens=4, stream=True)
        chunks, done = sse_events(w.post(path, body))
        assert done and all("usage" not in c for c in chunks)
        chunks, done = sse_events(w.post(path, dict(body, stream_options={"include_usage": True})))
        assert done and all("usage" not in c for c in chunks[:-1])
        last = chunks[-1]
        assert last["choices"] == [] and last["usage"]["completion_tokens"] == 4


def test_embeddings(spawn):
    w = spawn()
    r = w.post("/v1/embeddings", {"input": ["hello", "world", [1, 107, 108]],
                                  "model": "tiny"}).json()
    assert r["object"] == "list" and r["model"] == "tiny" and len(r["data"]) == 3
    vecs = [d["embedding"] for d in r["data"]]
    assert [d["index"] for d in r["data"]] == [0, 1, 2]
    for v in vecs:
        assert len(v) == 64 and abs(sum(x * x for x in v) - 1) < 1e-4
    assert vecs[0] != vecs[1]
    assert r["usage"]["prompt_tokens"] == 6 + 6 + 3
    # The same text alone gives the same vector; base64 is the same floats.
    alone = w.post("/v1/embeddings", {"input": "hello"}).json()["data"][0]["embedding"]
    assert alone == vecs[0]
    b = w.post("/v1/embeddings", {"input": "hello", "encoding_format": "base64"}).json()
    raw = base64.b64decode(b["data"][0]["embedding"])
    assert list(struct.unpack("<64f", raw)) == pytest.approx(alone, abs=1e-6)
    d = w.post("/v1/embeddings", {"input": "hello", "dimensions": 8}).json()["data"][0]
    assert len(d["embedding"]) == 8 and abs(sum(x * x for x in d["embedding"]) - 1) < 1e-4


def test_models_retrieve(spawn):
    w = spawn("--model", "m1", "--version", "4")
    assert w.get("/v1/models/m1").json()["id"] == "m1"
    assert w.get("/v1/models/m1:4").json()["version"] == "4"
    for bad in ("nope", "m1:5"):
        r = w.get("/v1/models/" + bad)
        assert r.status_code == 404
        assert r.json()["error"]["code"] == "model_not_found"


def test_resume_from_token_ids_equals_unbroken(spawn):
    """A `both` worker told the tokens the client already has continues
    exactly where an unbroken answer would: same ids, same text after the
    break, also across a character split over tokens and a stop sequence."""
    w = spawn()
    for body in ({"prompt": "once upon", "max_tokens": 30, "temperature": 0.9, "seed": 3},
                 {"messages": [{"role": "user", "content": "tell me"}], "max_tokens": 30}):
        path = "/v1/chat/completions" if "messages" in body else "/v1/completions"
        full = w.post(path, body).json()["choices"][0]
        text = full.get("text", full.get("message", {}).get("content"))
        for cut in (1, 7, 29):
            sent = full["token_ids"][:cut]
            r = w.post(path, dict(body, stream=True, generated_ids=sent))
            chunks, done = sse_events(r)
            assert done
            rest = [i for c in chunks for i in c["choices"][0]["token_ids"]]
            assert sent + rest == full["token_ids"]
            got = "".join(c["choices"][0].get("text", c["choices"][0].get("delta", {}).get(
                "content", "")) or "" for c in chunks)
            assert text.endswith(got)
        stop = text[10:12]
        want = w.post(path, dict(body, stop=stop)).json()["choices"][0]
        r = w.post(path, dict(body, stop=stop, generated_ids=want["token_ids"][:5]))
        assert r.json()["choices"][0]["token_ids"] == want["token_ids"]
