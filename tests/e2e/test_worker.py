"""End-to-end tests of `starcloud worker`: a tiny generated checkpoint, real
workers on free loopback ports, the OpenAI and KServe v2 shapes field by
field, SSE, determinism, prefill -> decode equal to a `both` worker, KV
leases, fault flags, trace context and bad requests."""
import http.server
import json
import os
import subprocess
import threading
import time

import pytest
import requests

from conftest import BIN, free_port, stop_process  # noqa: F401 (re-exported)


class Worker:
    """A `starcloud worker` on a free port of 127.0.0.1, live when built.
    ckpt is its --checkpoint (its --model-repository with repo=True); with
    cert (cert, key) it serves https, and requests check it against verify
    (a CA file). The other tests that start workers use this one."""

    def __init__(self, ckpt, *args, tmp=None, cert=None, verify=None, repo=False):
        self.port = free_port()
        self.verify = verify
        self.url = "%s://127.0.0.1:%d" % ("https" if cert else "http", self.port)
        tls = ["--tls-cert", cert[0], "--tls-key", cert[1]] if cert else []
        self.log = open(os.path.join(str(tmp), "worker-%d.log" % self.port), "w+")
        self.proc = subprocess.Popen(
            [BIN, "worker", "--model-repository" if repo else "--checkpoint", str(ckpt),
             "--listen", "127.0.0.1:%d" % self.port] + tls + list(args),
            stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + 30
        while time.time() < deadline:
            assert self.proc.poll() is None, self.output()
            try:
                if self.get("/v2/health/live", timeout=0.5).ok:
                    return
            except requests.RequestException:
                time.sleep(0.05)
        raise RuntimeError("worker did not start: " + self.output())

    def post(self, path, body, **kw):
        return requests.post(self.url + path, json=body, timeout=kw.pop("timeout", 10),
                             verify=self.verify, **kw)

    def get(self, path, **kw):
        return requests.get(self.url + path, timeout=kw.pop("timeout", 10), verify=self.verify,
                            **kw)

    def counters(self):
        return self.get("/debug/counters").json()

    def output(self):
        self.log.flush()
        self.log.seek(0)
        return self.log.read()

    def stop(self):
        stop_process(self.proc, timeout=5)
        self.log.close()


@pytest.fixture
def spawn(ckpt, tmp_path):
    started = []

    def start(*args, **kw):
        w = Worker(ckpt, *args, tmp=tmp_path, **kw)
        started.append(w)
        return w
    yield start
    for w in started:
        w.stop()


@pytest.fixture(scope="module")
def both(ckpt, tmp_path_factory):
    w = Worker(ckpt, "--model", "tiny", "--version", "3", "--id", "w-both",
               tmp=tmp_path_factory.mktemp("both"))
    yield w
    w.stop()


def sse_events(resp):
    """Parses an SSE body into the JSON chunks and whether [DONE] came."""
    chunks, done = [], False
    for block in resp.content.decode("utf-8").split("\n\n"):
        if not block.strip():
            continue
        assert block.startswith("data: "), block
        data = block[len("data: "):]
        if data == "[DONE]":
            done = True
        else:
            assert not done, "chunk after [DONE]"
            chunks.append(json.loads(data))
    return chunks, done


def completion(w, prompt, n=12, **extra):
    body = {"prompt": prompt, "max_tokens": n}
    body.update(extra)
    r = w.post("/v1/completions", body)
    assert r.status_code == 200, r.text
    return r.json()


# ---------------------------------------------------------------------------
# Checkpoints and flags
# ---------------------------------------------------------------------------

def test_gen_checkpoint_size(ckpt):
    # 7 header ints + weights of dim 64, hidden 176, 2 layers, kv_dim 32,
    # vocab 512 (unshared classifier), seq_len 128.
    d, h, L, kv, v, s = 64, 176, 2, 32, 512, 128
    floats = v * d + L * (d + d * d + 2 * kv * d + d * d + d + 3 * h * d) + d + s * 16 + v * d
    assert os.path.getsize(ckpt) == 28 + 4 * floats


@pytest.mark.parametrize("args,needle", [
    (["--role", "sideways"], "--role"),
    (["--listen", "nope"], "--listen"),
    (["--fail-rate", "2"], "--fail-rate"),
    (["--kv-lease", "-1s"], "--kv-lease"),
    (["--bogus"], "unknown option"),
    # NaN, fractions, trailing junk (issue 21)
    (["--fail-rate", "nan"], "--fail-rate"),
    (["--max-tokens", "2.7"], "--max-tokens"),
    (["--kv-lease", "nan"], "--kv-lease"),
    (["--fault-seed", "-1"], "--fault-seed"),
    (["--latency-ms", "10x"], "--latency-ms"),
    (["--max-batch", "0"], "--max-batch"),
    (["--max-batch", "8", "--max-batch-tokens", "4"], "--max-batch-tokens"),
    (["--max-queue", "x"], "--max-queue"),
])
def test_bad_flags_exit_2(ckpt, args, needle):
    p = subprocess.run([BIN, "worker", "--checkpoint", str(ckpt)] + args,
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 2
    assert needle in p.stderr


def test_bad_checkpoints_rejected(tmp_path, ckpt):
    data = open(ckpt, "rb").read()
    trunc = tmp_path / "trunc.bin"
    trunc.write_bytes(data[:-4])
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"\xff" * 100)
    for path, needle in [(trunc, "truncated"), (junk, "invalid header"),
                         (tmp_path / "missing.bin", "cannot open")]:
        p = subprocess.run([BIN, "worker", "--checkpoint", str(path)],
                           capture_output=True, text=True, timeout=10)
        assert p.returncode == 2, p.stderr
        assert needle in p.stderr


def test_help():
    p = subprocess.run([BIN, "worker", "--help"], capture_output=True, text=True)
    assert p.returncode == 0 and "--gen-checkpoint" in p.stdout


# ---------------------------------------------------------------------------
# OpenAI shapes
# ---------------------------------------------------------------------------

def test_completion_shape(both):
    r = both.post("/v1/completions", {"model": "tiny", "prompt": "Once upon a time",
                                      "max_tokens": 10})
    assert r.status_code == 200
    assert r.headers["x-starcloud-replica"] == "w-both"
    assert r.headers["content-type"] == "application/json"
    d = r.json()
    assert set(d) == {"id", "object", "created", "model", "choices", "usage"}
    assert d["object"] == "text_completion" and d["model"] == "tiny"
    assert d["id"].startswith("cmpl-") and isinstance(d["created"], int)
    (c,) = d["choices"]
    assert c["index"] == 0 and c["logprobs"] is None
    assert c["finish_reason"] == "length"
    assert len(c["token_ids"]) == 10 and isinstance(c["text"], str) and c["text"]
    # BOS + one token per byte with the byte-level tokenizer.
    assert d["usage"] == {"prompt_tokens": 17, "completion_tokens": 10, "total_tokens": 27}


def test_deterministic_and_prompt_dependent(both):
    a = completion(both, "Once upon a time", 20)
    b = completion(both, "Once upon a time", 20)
    c = completion(both, "A different prompt", 20)
    assert a["choices"][0]["token_ids"] == b["choices"][0]["token_ids"]
    assert a["choices"][0]["text"] == b["choices"][0]["text"]
    assert a["choices"][0]["token_ids"] != c["choices"][0]["token_ids"]


def test_model_version_selector(both):
    assert both.post("/v1/completions", {"model": "tiny:3", "prompt": "x",
                                         "max_tokens": 1}).status_code == 200
    r = both.post("/v1/completions", {"model": "tiny:4", "prompt": "x"})
    assert r.status_code == 404 and r.json()["error"]["param"] == "model"


def test_stream_equals_non_stream(both):
    full = completion(both, "Hello there", 16)
    r = both.post("/v1/completions", {"prompt": "Hello there", "max_tokens": 16,
                                      "stream": True})
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/event-stream; charset=utf-8"
    assert r.headers["x-starcloud-replica"] == "w-both"
    chunks, done = sse_events(r)
    assert done
    for ch in chunks:
        assert ch["object"] == "text_completion" and ch["model"] == "tiny"
        assert ch["id"] == chunks[0]["id"]
    assert [ch["choices"][0]["finish_reason"] for ch in chunks[:-1]] == [None] * 16
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all("usage" not in ch for ch in chunks)  # not asked for
    text = "".join(ch["choices"][0]["text"] for ch in chunks)
    ids = [i for ch in chunks for i in ch["choices"][0]["token_ids"]]
    assert text == full["choices"][0]["text"]
    assert ids == full["choices"][0]["token_ids"]


def test_chat_shapes(both):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}]
    r = both.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 8})
    assert r.status_code == 200
    d = r.json()
    assert d["object"] == "chat.completion" and d["id"].startswith("chatcmpl-")
    (c,) = d["choices"]
    assert c["message"]["role"] == "assistant"
    assert isinstance(c["message"]["content"], str)
    assert c["finish_reason"] in ("length", "stop")
    s = both.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 8, "stream": True})
    chunks, done = sse_events(s)
    assert done
    assert all(ch["object"] == "chat.completion.chunk" for ch in chunks)
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-1]["choices"][0]["finish_reason"] == c["finish_reason"]
    text = "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks)
    assert text == c["message"]["content"]


def test_models(both):
    d = both.get("/v1/models").json()
    assert d["object"] == "list"
    (m,) = d["data"]
    assert m["id"] == "tiny" and m["object"] == "model" and m["owned_by"] == "starcloud"


def test_temperature_sampling_seeded(both):
    a = completion(both, "abc", 20, temperature=1.0, seed=5)
    b = completion(both, "abc", 20, temperature=1.0, seed=5)
    c = completion(both, "abc", 20, temperature=1.0, seed=6)
    assert a["choices"][0]["token_ids"] == b["choices"][0]["token_ids"]
    assert a["choices"][0]["token_ids"] != c["choices"][0]["token_ids"]


def test_top_p(both):
    greedy = completion(both, "abc", 20)["choices"][0]["token_ids"]
    # A nucleus smaller than any probability is the most likely token alone.
    tiny = completion(both, "abc", 20, temperature=1.0, top_p=1e-6, seed=5)
    assert tiny["choices"][0]["token_ids"] == greedy
    a = completion(both, "abc", 20, temperature=1.0, top_p=0.9, seed=5)
    assert a == dict(a, choices=completion(both, "abc", 20, temperature=1.0, top_p=0.9,
                                           seed=5)["choices"])
    full = completion(both, "abc", 20, temperature=1.0, top_p=1.0, seed=5)
    plain = completion(both, "abc", 20, temperature=1.0, seed=5)
    assert full["choices"][0]["token_ids"] == plain["choices"][0]["token_ids"]


def stop_at(text):
    """A stop sequence that occurs in text, and where it first does."""
    for k in range(6, len(text) - 3):
        s = text[k:k + 3]
        if s.strip() and text.find(s) == k:
            return s, k
    pytest.skip("no usable stop sequence in %r" % text)


def test_stop_sequences_cut_the_answer(both):
    ref = completion(both, "Once upon a time", 40)["choices"][0]
    s, k = stop_at(ref["text"])
    for stop in (s, [s], ["\u2603never", s]):
        got = completion(both, "Once upon a time", 40, stop=stop)["choices"][0]
        assert got["text"] == ref["text"][:k], stop
        assert got["finish_reason"] == "stop"
        assert ref["token_ids"][:len(got["token_ids"])] == got["token_ids"]
    # Streamed: the same text (the tail that might start the sequence is
    # held back, never sent and then cut), the same ids, then "stop".
    r = both.post("/v1/completions", {"prompt": "Once upon a time", "max_tokens": 40,
                                      "stop": s, "stream": True})
    chunks, done = sse_events(r)
    assert done and chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert "".join(ch["choices"][0]["text"] for ch in chunks) == ref["text"][:k]
    assert [i for ch in chunks for i in ch["choices"][0]["token_ids"]] == got["token_ids"]
    # A sequence that never occurs changes nothing.
    none = completion(both, "Once upon a time", 40, stop=["\u2603never"])["choices"][0]
    assert none["text"] == ref["text"] and none["finish_reason"] == "length"


def test_stop_in_chat(both):
    msgs = [{"role": "user", "content": "tell me a story"}]
    ref = both.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 40}).json()
    text = ref["choices"][0]["message"]["content"]
    s, k = stop_at(text)
    got = both.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 40,
                                             "stop": [s]}).json()["choices"][0]
    assert got["message"]["content"] == text[:k] and got["finish_reason"] == "stop"


# ---------------------------------------------------------------------------
# KServe v2
# ---------------------------------------------------------------------------

def test_kserve_health_and_metadata(both):
    assert both.get("/v2/health/live").status_code == 200
    assert both.get("/v2/health/ready").status_code == 200
    assert both.get("/v2/models/tiny/ready").status_code == 200
    assert both.get("/v2/models/tiny/versions/3/ready").status_code == 200
    assert both.get("/v2/models/tiny/versions/9/ready").status_code == 404
    assert both.get("/v2/models/other/ready").status_code == 404
    d = both.get("/v2").json()
    assert d["name"] == "starcloud-worker" and isinstance(d["version"], str)
    assert d["extensions"] == ["binary_tensor_data", "generate", "parameters",
                               "model_repository"]
    m = both.get("/v2/models/tiny").json()
    assert m["name"] == "tiny" and m["versions"] == ["3"] and m["platform"]
    # The first dimension is the batch (Triton's -1).
    assert {"name": "text_input", "datatype": "BYTES", "shape": [-1]} in m["inputs"]
    assert {"name": "input_ids", "datatype": "INT64", "shape": [-1, -1]} in m["inputs"]
    assert [o["name"] for o in m["outputs"]] == ["text_output", "output_ids"]
    assert both.get("/v2/models/tiny/versions/3").json() == m


def test_kserve_infer_matches_completion(both):
    ref = completion(both, "Once upon a time", 10)["choices"][0]
    body = {"id": "req-1", "inputs": [{"name": "text_input", "datatype": "BYTES",
                                       "shape": [1], "data": ["Once upon a time"]}],
            "parameters": {"max_tokens": 10}}
    for path in ("/v2/models/tiny/infer", "/v2/models/tiny/versions/3/infer"):
        r = both.post(path, body)
        assert r.status_code == 200, r.text
        assert r.headers["x-starcloud-replica"] == "w-both"
        d = r.json()
        assert d["model_name"] == "tiny" and d["model_version"] == "3" and d["id"] == "req-1"
        text, ids = d["outputs"]
        assert text == {"name": "text_output", "datatype": "BYTES", "shape": [1],
                        "data": [ref["text"]]}
        assert ids == {"name": "output_ids", "datatype": "INT64", "shape": [10],
                       "data": ref["token_ids"]}


def test_kserve_input_ids_and_output_filter(both):
    ids = [1] + [b + 3 for b in b"Once upon a time"]
    ref = completion(both, "Once upon a time", 6)["choices"][0]["token_ids"]
    r = both.post("/v2/models/tiny/infer", {
        "inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [1, len(ids)],
                    "data": ids}],
        "outputs": [{"name": "output_ids"}], "parameters": {"max_tokens": 6}})
    assert r.status_code == 200, r.text
    (out,) = r.json()["outputs"]
    assert out["name"] == "output_ids" and out["data"] == ref


@pytest.mark.parametrize("body,needle", [
    ({}, "inputs"),
    ({"inputs": []}, "inputs"),
    ({"inputs": [{"name": "image", "datatype": "BYTES", "shape": [1], "data": ["x"]}]},
     "inputs[0].name"),
    ({"inputs": [{"name": "text_input", "datatype": "FP32", "shape": [1], "data": ["x"]}]},
     "inputs[0].datatype"),
    ({"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [2], "data": ["x"]}]},
     "inputs[0].data"),
    ({"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": "1", "data": ["x"]}]},
     "inputs[0].shape"),
    ({"inputs": [{"name": "input_ids", "datatype": "INT64", "shape": [1], "data": [99999]}]},
     "inputs[0].data"),
    ({"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1], "data": ["x"]}],
      "outputs": [{"name": "logits"}]}, "outputs[0].name"),
    ({"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1], "data": ["x"]}],
      "parameters": {"max_tokens": 0}}, "max_tokens"),
])
def test_kserve_bad_requests(both, body, needle):
    r = both.post("/v2/models/tiny/infer", body)
    assert r.status_code == 400
    err = r.json()["error"]
    assert isinstance(err, str) and needle in err


def test_kserve_unknown_model(both):
    r = both.post("/v2/models/nope/infer", {"inputs": []})
    assert r.status_code == 404 and "nope" in r.json()["error"]


# ---------------------------------------------------------------------------
# Bad requests (OpenAI)
# ---------------------------------------------------------------------------

@pytest.mark.parametrize("path,body,field", [
    ("/v1/completions", {"prompt": "x", "max_tokens": 0}, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": 100000}, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "max_tokens": "5"}, "max_tokens"),
    ("/v1/completions", {"prompt": "x", "temperature": -1}, "temperature"),
    ("/v1/completions", {"prompt": "x", "top_p": 0}, "top_p"),
    ("/v1/completions", {"prompt": "x", "top_p": 1.5}, "top_p"),
    ("/v1/completions", {"prompt": "x", "top_p": "all"}, "top_p"),
    ("/v1/completions", {"prompt": "x", "stop": 5}, "stop"),
    ("/v1/completions", {"prompt": "x", "stop": ""}, "stop"),
    ("/v1/completions", {"prompt": "x", "stop": ["a", "b", "c", "d", "e"]}, "stop"),
    ("/v1/completions", {"prompt": "x", "stop": ["a", ""]}, "stop[1]"),
    ("/v1/completions", {"prompt": "x", "stop": ["y" * 65]}, "stop[0]"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "stop": [7]},
     "stop[0]"),
    ("/v1/completions", {"prompt": "x", "stream": "yes"}, "stream"),
    ("/v1/completions", {"prompt": "x", "n": 17}, "n"),
    ("/v1/completions", {"prompt": "x", "n": 0}, "n"),
    ("/v1/completions", {"prompt": ["x"] * 10, "n": 16}, "n"),
    ("/v1/completions", {"prompt": ["x"] * 65}, "prompt"),
    ("/v1/completions", {"prompt": ["x", 5]}, "prompt[1]"),
    ("/v1/completions", {"prompt": [[1, 2], []]}, "prompt[1]"),
    ("/v1/completions", {"prompt": "x", "max_completion_tokens": 0}, "max_completion_tokens"),
    ("/v1/completions", {"prompt": "x", "logprobs": 6}, "logprobs"),
    ("/v1/completions", {"prompt": "x", "logprobs": True}, "logprobs"),
    ("/v1/completions", {"prompt": "x", "stream_options": {"include_usage": True}},
     "stream_options"),
    ("/v1/completions", {"prompt": "x", "stream": True, "stream_options": {"include_usage": 1}},
     "stream_options"),
    ("/v1/completions", {"prompt": "x", "presence_penalty": 0.5}, "presence_penalty"),
    ("/v1/completions", {"prompt": "x", "logit_bias": {"5": 1}}, "logit_bias"),
    ("/v1/completions", {"prompt": "x", "echo": True}, "echo"),
    ("/v1/completions", {"prompt": "x", "best_of": 3}, "best_of"),
    ("/v1/completions", {"prompt": "x", "generated_ids": [1, "a"]}, "generated_ids"),
    ("/v1/completions", {"prompt": "x", "n": 2, "generated_ids": [5]}, "generated_ids"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2},
     "top_logprobs"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "logprobs": True,
                              "top_logprobs": 21}, "top_logprobs"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": "http://x"}}]}]},
     "messages[0].content[0].type"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": [{"type": "text"}]}]},
     "messages[0].content[0].text"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "tools": [{"type": "function"}]}, "tools"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "response_format": {"type": "json_object"}}, "response_format"),
    # Fields this worker does not honour are refused by name, never ignored.
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "tool_choice": "auto"}, "tool_choice"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "tool_choice": {"type": "function",
                                              "function": {"name": "f"}}}, "tool_choice"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "parallel_tool_calls": False}, "parallel_tool_calls"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "function_call": "auto"}, "function_call"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "response_format": {"type": "json_schema", "json_schema": {}}},
     "response_format"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "modalities": ["text", "audio"]}, "modalities"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "store": True}, "store"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "metadata": {"a": "b"}}, "metadata"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "reasoning_effort": "low"}, "reasoning_effort"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "service_tier": "flex"}, "service_tier"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "user": 5}, "user"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "top_k": 5},
     "top_k"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}], "echo": False},
     "echo"),
    ("/v1/completions", {"prompt": "x", "tool_choice": "required"}, "tool_choice"),
    ("/v1/completions", {"prompt": "x", "suffix": "end"}, "suffix"),
    ("/v1/completions", {"prompt": "x", "repetition_penalty": 1.1}, "repetition_penalty"),
    ("/v1/completions", {"prompt": "x", "ignore_eos": True}, "ignore_eos"),
    ("/v1/completions", {"prompt": "x", "stream stream_options": 1}, "stream stream_options"),
    ("/v1/completions", {"prompt": "x", "": 1}, ""),
    ("/v1/embeddings", {"input": "x", "tools": []}, "tools"),
    ("/v1/embeddings", {"input": "x", "max_tokens": 3}, "max_tokens"),
    ("/v1/embeddings", {"input": "x", "encoding_format": "hex"}, "encoding_format"),
    ("/v1/embeddings", {"input": "x", "dimensions": 0}, "dimensions"),
    ("/v1/embeddings", {"input": "x", "dimensions": 100000}, "dimensions"),
    ("/v1/embeddings", {}, "input"),
    ("/v1/embeddings", {"input": [[]]}, "input[0]"),
    ("/v1/completions", {"prompt": 5}, "prompt"),
    ("/v1/completions", {}, "prompt"),
    ("/v1/completions", {"prompt": "x" * 200}, "prompt"),
    ("/v1/completions", {"prompt": [1, 2, 100000]}, "prompt"),
    ("/v1/completions", {"prompt": "x", "model": 7}, "model"),
    ("/v1/chat/completions", {"messages": []}, "messages"),
    ("/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]},
     "messages[0].role"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": 3}]},
     "messages[0].content"),
    ("/v1/chat/completions", {"prompt": "x"}, "prompt"),
])
def test_bad_requests_name_the_field(both, path, body, field):
    before = both.counters()["prefills"]
    r = both.post(path, body)
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["type"] == "invalid_request_error" and err["param"] == field and err["message"]
    assert both.counters()["prefills"] == before


def test_neutral_values_of_unsupported_fields_accepted(both):
    """A field at the value that asks for nothing (what SDKs and frameworks
    send by default) changes nothing: the answer equals the plain one."""
    chat = {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 5}
    plain = both.post("/v1/chat/completions", chat)
    assert plain.status_code == 200, plain.text
    neutral = dict(chat, tools=[], tool_choice="none", function_call="none", functions=None,
                   parallel_tool_calls=None, response_format={"type": "text"}, user="u-1",
                   store=False, metadata={}, service_tier="auto", modalities=["text"],
                   audio=None, prediction=None, reasoning_effort=None, logit_bias={},
                   presence_penalty=0, frequency_penalty=0.0, web_search_options=None)
    r = both.post("/v1/chat/completions", neutral)
    assert r.status_code == 200, r.text
    assert r.json()["choices"] == plain.json()["choices"]
    r = both.post("/v1/completions", {"prompt": "x", "max_tokens": 2, "echo": False,
                                      "best_of": 1, "suffix": "", "tool_choice": None})
    assert r.status_code == 200, r.text
    r = both.post("/v1/embeddings", {"input": "x", "user": "u-1"})
    assert r.status_code == 200, r.text


def test_malformed_json_and_big_body(both):
    r = requests.post(both.url + "/v1/completions", data=b"{not json", timeout=5)
    assert r.status_code == 400 and r.json()["error"]["param"] == "body"
    r = requests.post(both.url + "/v1/completions", data=b"[1]", timeout=5)
    assert r.status_code == 400
    r = requests.post(both.url + "/v1/completions", data=b"x" * (2 << 20), timeout=10)
    assert r.status_code == 413
    assert both.get("/nope").status_code == 404
    assert both.get("/v1/completions").status_code == 404


def test_metrics_and_counters(both):
    completion(both, "metrics", 3)
    text = both.get("/metrics").text
    for name in ("starcloud_worker_requests_total{code=\"200\"}",
                 "starcloud_worker_tokens_generated_total", "starcloud_worker_prefills_total",
                 "starcloud_worker_decode_steps_total", "starcloud_worker_kv_handles_live"):
        assert name in text
    c = both.counters()
    assert c["prefills"] >= 1 and c["tokens_generated"] >= 3 and c["role"] == "both"
    assert c["responses_by_code"]["200"] >= 1


# ---------------------------------------------------------------------------
# Prefill / decode
# ---------------------------------------------------------------------------

@pytest.fixture
def pd(spawn):
    return spawn("--role", "prefill"), spawn("--role", "decode"), spawn("--role", "both")


def prefill(w, **body):
    r = w.post("/v1/prefill", body)
    assert r.status_code == 200, r.text
    return r.json()


def test_prefill_decode_equals_both(pd):
    p, d, b = pd
    for prompt in ("Once upon a time", "x", "The quick brown fox jumps"):
        ref = completion(b, prompt, 24)
        pre = prefill(p, prompt=prompt)
        assert set(pre) == {"kv_handle", "kv_url", "first_token", "n_tokens", "lease_ms",
                            "model", "version"}
        assert pre["kv_url"] == p.url + "/v1/kv/" + pre["kv_handle"]
        assert pre["n_tokens"] == ref["usage"]["prompt_tokens"]
        assert pre["first_token"] == ref["choices"][0]["token_ids"][0]
        r = d.post("/v1/decode", {"kv_url": pre["kv_url"], "first_token": pre["first_token"],
                                  "max_tokens": 24})
        assert r.status_code == 200, r.text
        out = r.json()
        assert out["choices"] == ref["choices"]
        assert out["usage"] == ref["usage"]
    # The decode worker never prefilled; the prefill worker never decoded.
    assert d.counters()["prefills"] == 0 and d.counters()["kv_pulls"] == 3
    assert p.counters()["decode_steps"] == 0 and p.counters()["prefills"] == 3


def test_decode_stream_and_chat(pd):
    p, d, b = pd
    msgs = [{"role": "user", "content": "tell me a story"}]
    ref = b.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 12}).json()
    pre = prefill(p, messages=msgs)
    r = d.post("/v1/decode", {"kv_url": pre["kv_url"], "first_token": pre["first_token"],
                              "max_tokens": 12, "format": "chat", "stream": True})
    assert r.status_code == 200 and r.headers["content-type"] == "text/event-stream; charset=utf-8"
    chunks, done = sse_events(r)
    assert done
    text = "".join(ch["choices"][0]["delta"].get("content", "") for ch in chunks)
    assert text == ref["choices"][0]["message"]["content"]


def test_decode_retry_with_generated_ids(pd):
    p, d, b = pd
    ref = completion(b, "resume me", 20)["choices"][0]
    pre = prefill(p, prompt="resume me")
    base = {"kv_url": pre["kv_url"], "first_token": pre["first_token"], "max_tokens": 20,
            "stream": True}

    def rest(**extra):
        r = d.post("/v1/decode", dict(base, **extra))
        assert r.status_code == 200, r.text
        chunks, done = sse_events(r)
        assert done and chunks[-1]["choices"][0]["finish_reason"] == ref["finish_reason"]
        return [i for ch in chunks for i in ch["choices"][0]["token_ids"]]
    # The client has t1..t7: generated_ids carries t2..t7.
    got = ref["token_ids"][:7]
    assert got + rest(generated_ids=got[1:]) == ref["token_ids"]
    # Only t1 arrived.
    assert [ref["token_ids"][0]] + rest(first_token_relayed=True) == ref["token_ids"]
    # Nothing arrived: an empty list is a fresh attempt.
    assert rest(generated_ids=[]) == ref["token_ids"]
    # Everything arrived but the end: only the final chunk and [DONE].
    assert rest(generated_ids=ref["token_ids"][1:]) == []
    for extra, field in [({"generated_ids": [1], "first_token_relayed": False},
                          "first_token_relayed"),
                         ({"generated_ids": ref["token_ids"]}, "generated_ids"),
                         ({"generated_ids": [-1]}, "generated_ids"),
                         ({"generated_ids": 5}, "generated_ids"),
                         ({"first_token_relayed": "yes"}, "first_token_relayed")]:
        r = d.post("/v1/decode", dict(base, **extra))
        assert r.status_code == 400 and r.json()["error"]["param"] == field, extra


def broken_stream(worker, body):
    """Streams a decode that the worker breaks mid-way (--fail-decode-after-
    tokens); returns the token ids and text the client got before the cut."""
    r = requests.post(worker.url + "/v1/decode", json=body, stream=True, timeout=5)
    raw = b""
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        for part in r.iter_content(chunk_size=None):
            raw += part
    relayed = [json.loads(block[len("data: "):]) for block in raw.decode().split("\n\n")
               if block.startswith("data: ")]
    return ([i for ch in relayed for i in ch["choices"][0]["token_ids"]],
            "".join(ch["choices"][0]["text"] for ch in relayed))


def test_mid_stream_failure_resumed_on_another_decode_worker(spawn):
    """The gateway's scenario: decode worker 1 dies after 5 tokens; the
    tokens relayed so far go to worker 2 as generated_ids, with the KV the
    prefill worker already computed; the client's text is unchanged."""
    p = spawn("--role", "prefill")
    d1 = spawn("--role", "decode", "--fail-decode-after-tokens", "5")
    d2 = spawn("--role", "decode")
    b = spawn()
    ref = completion(b, "a story about a fox", 18)["choices"][0]
    pre = prefill(p, prompt="a story about a fox")
    body = {"kv_url": pre["kv_url"], "first_token": pre["first_token"], "max_tokens": 18,
            "stream": True}
    got_ids, got_text = broken_stream(d1, body)
    assert len(got_ids) == 5
    r2 = d2.post("/v1/decode", dict(body, generated_ids=got_ids[1:]))
    chunks, done = sse_events(r2)
    assert done
    ids = got_ids + [i for ch in chunks for i in ch["choices"][0]["token_ids"]]
    text = got_text + "".join(ch["choices"][0]["text"] for ch in chunks)
    assert ids == ref["token_ids"] and text == ref["text"]
    assert p.counters()["prefills"] == 1 and p.counters()["kv_fetches_served"] == 2
    assert d2.counters()["prefills"] == 0


def test_stop_across_a_resumed_decode(spawn):
    """A decode that dies mid-answer and is resumed elsewhere cuts at the
    same stop sequence: the resumed worker holds back exactly the tail the
    first one held, so the client's text equals an uninterrupted answer."""
    p = spawn("--role", "prefill")
    d1 = spawn("--role", "decode", "--fail-decode-after-tokens", "5")
    d2 = spawn("--role", "decode")
    b = spawn()
    ref = completion(b, "a story about a fox", 40)["choices"][0]
    s, k = stop_at(ref["text"])
    want = completion(b, "a story about a fox", 40, stop=s)["choices"][0]
    assert want["text"] == ref["text"][:k] and len(want["token_ids"]) > 5
    pre = prefill(p, prompt="a story about a fox")
    body = {"kv_url": pre["kv_url"], "first_token": pre["first_token"], "max_tokens": 40,
            "stream": True, "stop": s}
    got_ids, got_text = broken_stream(d1, body)
    r2 = d2.post("/v1/decode", dict(body, generated_ids=got_ids[1:]))
    chunks, done = sse_events(r2)
    assert done and chunks[-1]["choices"][0]["finish_reason"] == "stop"
    text = got_text + "".join(ch["choices"][0]["text"] for ch in chunks)
    ids = got_ids + [i for ch in chunks for i in ch["choices"][0]["token_ids"]]
    assert text == want["text"] and ids == want["token_ids"]


def test_both_worker_decodes_its_own_handle(spawn):
    b = spawn()
    ref = completion(b, "self", 8)
    pre = prefill(b, prompt="self")
    r = b.post("/v1/decode", {"kv_url": pre["kv_url"], "first_token": pre["first_token"],
                              "max_tokens": 8})
    assert r.status_code == 200 and r.json()["choices"] == ref["choices"]


def test_prefill_input_ids_and_kv_block(pd):
    p, d, b = pd
    pre = prefill(p, input_ids=[1, 80, 81, 82])
    r = requests.get(pre["kv_url"], timeout=5)
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/octet-stream"
    blob = r.content
    assert blob[:4] == b"SCKV"
    ver, layers, kv_dim, n_tok, seq, first = [int.from_bytes(blob[4 + 4 * i:8 + 4 * i],
                                                             "little") for i in range(6)]
    assert (ver, layers, kv_dim, n_tok, seq, first) == (1, 2, 32, 4, 128, pre["first_token"])
    assert len(blob) == 48 + layers * 2 * n_tok * kv_dim * 4


def test_roles_enforced(pd):
    p, d, b = pd
    r = d.post("/v1/completions", {"prompt": "x"})
    assert r.status_code == 404 and r.json()["error"]["param"] == "role"
    r = p.post("/v1/decode", {"kv_url": "http://127.0.0.1:1/v1/kv/x", "first_token": 1})
    assert r.status_code == 404 and r.json()["error"]["param"] == "role"
    r = d.post("/v1/prefill", {"prompt": "x"})
    assert r.status_code == 404


def test_decode_bad_kv(pd):
    p, d, b = pd
    bad_port = free_port()
    r = d.post("/v1/decode", {"kv_url": "http://127.0.0.1:%d/v1/kv/kv-00" % bad_port,
                              "first_token": 3})
    assert r.status_code == 502 and r.json()["error"]["param"] == "kv_url"
    r = d.post("/v1/decode", {"kv_url": p.url + "/v1/kv/kv-0000000000000000",
                              "first_token": 3})
    assert r.status_code == 502 and "404" in r.json()["error"]["message"]
    pre = prefill(p, prompt="abc")
    r = d.post("/v1/decode", {"kv_url": pre["kv_url"], "first_token": pre["first_token"] ^ 1})
    assert r.status_code == 400 and r.json()["error"]["param"] == "first_token"
    for body, field in [({"first_token": 1}, "kv_url"),
                        ({"kv_url": "file:///etc/passwd", "first_token": 1}, "kv_url"),
                        ({"kv_url": pre["kv_url"]}, "first_token"),
                        ({"kv_url": pre["kv_url"], "first_token": 1, "format": "x"}, "format")]:
        r = d.post("/v1/decode", body)
        assert r.status_code == 400 and r.json()["error"]["param"] == field
    assert d.counters()["prefills"] == 0


def test_kv_block_from_other_model_refused(spawn, ckpt, tmp_path):
    other = tmp_path / "other.bin"
    subprocess.run([BIN, "worker", "--gen-checkpoint", str(other), "--seq-len", "128",
                    "--seed", "8"], check=True, capture_output=True)
    p = Worker(other, "--role", "prefill", tmp=tmp_path)
    try:
        d = spawn("--role", "decode")
        pre = prefill(p, prompt="abc")
        r = d.post("/v1/decode", {"kv_url": pre["kv_url"], "first_token": pre["first_token"]})
        assert r.status_code == 502 and "another model" in r.json()["error"]["message"]
    finally:
        p.stop()


def test_kv_lease_expiry_renew_delete(spawn):
    p = spawn("--role", "prefill", "--kv-lease", "600ms")
    d = spawn("--role", "decode")
    a = prefill(p, prompt="lease a")
    bb = prefill(p, prompt="lease b")
    c = prefill(p, prompt="lease c")
    assert p.counters()["kv_handles_live"] == 3
    assert requests.delete(c["kv_url"], timeout=5).status_code == 204
    assert requests.delete(c["kv_url"], timeout=5).status_code == 404
    # Keep b alive by renewing it; let a run out.
    for _ in range(4):
        time.sleep(0.3)
        r = requests.post(bb["kv_url"] + "/renew", timeout=5)
        assert r.status_code == 200 and r.json()["lease_ms"] == 600
    assert requests.get(a["kv_url"], timeout=5).status_code == 404
    assert requests.post(a["kv_url"] + "/renew", timeout=5).status_code == 404
    r = d.post("/v1/decode", {"kv_url": a["kv_url"], "first_token": a["first_token"]})
    assert r.status_code == 502
    assert requests.get(bb["kv_url"], timeout=5).status_code == 200
    cnt = p.counters()
    assert cnt["kv_expired"] >= 1 and cnt["kv_handles_live"] == 1


def test_kv_max_handles(spawn):
    p = spawn("--role", "prefill", "--kv-max-handles", "2")
    prefill(p, prompt="one")
    prefill(p, prompt="two")
    r = p.post("/v1/prefill", {"prompt": "three"})
    assert r.status_code == 503 and r.json()["error"]["param"] == "kv_handle"


# ---------------------------------------------------------------------------
# Fault injection
# ---------------------------------------------------------------------------

def test_crash_after(spawn):
    w = spawn("--crash-after", "2")
    completion(w, "a", 2)
    assert w.get("/v2/health/live").status_code == 200  # health does not count
    completion(w, "b", 2)
    assert w.proc.wait(timeout=5) == 3
    with pytest.raises(requests.ConnectionError):
        w.post("/v1/completions", {"prompt": "c"})


def test_fail_rate_seeded(spawn):
    def codes(w):
        return [w.post("/v1/completions", {"prompt": "f", "max_tokens": 1}).status_code
                for _ in range(40)]
    a = codes(spawn("--fail-rate", "0.5", "--fault-seed", "3"))
    b = codes(spawn("--fail-rate", "0.5", "--fault-seed", "3"))
    assert a == b
    assert set(a) == {200, 500} and 8 <= a.count(500) <= 32
    w = spawn("--fail-rate", "1")
    r = w.post("/v1/completions", {"prompt": "f"})
    assert r.status_code == 500 and "injected" in r.json()["error"]["message"]
    assert w.get("/v2/health/ready").status_code == 200
    assert w.counters()["faults_injected"] == 1


def test_latency(spawn):
    w = spawn("--latency-ms", "300")
    t0 = time.time()
    completion(w, "slow", 2)
    assert time.time() - t0 >= 0.3
    # Health is not delayed, and the loop serves it while a request waits.
    assert w.get("/v2/health/live", timeout=2).status_code == 200


def test_hang_after(spawn):
    w = spawn("--hang-after", "1")
    completion(w, "ok", 2)
    with pytest.raises(requests.Timeout):
        w.post("/v1/completions", {"prompt": "hang"}, timeout=0.5)
    with pytest.raises(requests.Timeout):
        w.get("/v2/health/live", timeout=0.5)
    assert w.proc.poll() is None


def test_fail_decode_after_tokens(spawn):
    w = spawn("--fail-decode-after-tokens", "3")
    r = requests.post(w.url + "/v1/completions", json={"prompt": "cut", "max_tokens": 10,
                                                        "stream": True},
                      stream=True, timeout=5)
    assert r.status_code == 200
    got = b""
    with pytest.raises(requests.exceptions.ChunkedEncodingError):
        for part in r.iter_content(chunk_size=None):
            got += part
    text = got.decode()
    assert text.count("data: ") == 3 and "[DONE]" not in text
    # A non-streamed request is cut too: its head went out at the first
    # token (the heartbeat), its body never completes.
    with pytest.raises((requests.ConnectionError, requests.exceptions.ChunkedEncodingError)):
        w.post("/v1/completions", {"prompt": "cut", "max_tokens": 10})


# ---------------------------------------------------------------------------
# Trace context and OTLP
# ---------------------------------------------------------------------------

class Collector(http.server.BaseHTTPRequestHandler):
    spans = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        Collector.spans.append((self.path, json.loads(body)))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


def test_traceparent_and_otlp(spawn):
    srv = http.server.HTTPServer(("127.0.0.1", 0), Collector)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        w = spawn("--otlp", "http://127.0.0.1:%d" % srv.server_port, "--id", "w-otlp")
        trace, parent = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
        r = w.post("/v1/completions", {"prompt": "trace", "max_tokens": 2},
                   headers={"traceparent": "00-%s-%s-01" % (trace, parent)})
        assert r.status_code == 200
        tp = r.headers["traceparent"].split("-")
        assert tp[0] == "00" and tp[1] == trace and len(tp[2]) == 16 and tp[2] != parent
        # An invalid header starts a new trace.
        r2 = w.get("/v1/models", headers={"traceparent": "00-" + "0" * 32 + "-" + parent + "-01"})
        assert r2.headers["traceparent"].split("-")[1] != "0" * 32
        def ours():
            for path, doc in Collector.spans:
                for rs in doc["resourceSpans"]:
                    for sp in rs["scopeSpans"][0]["spans"]:
                        if sp["traceId"] == trace:
                            return path, rs, sp
            return None
        deadline = time.time() + 30
        while time.time() < deadline and not ours():
            time.sleep(0.05)
        path, rs, span = ours()
        assert path == "/v1/traces"
        assert rs["resource"]["attributes"][0] == {"key": "service.name",
                                                   "value": {"stringValue": "starcloud-worker"}}
        assert len(rs["scopeSpans"][0]["spans"]) == 1
        # The fixture's health probes are not exported (no trace per probe).
        names = [sp["name"] for _, doc in Collector.spans for rs2 in doc["resourceSpans"]
                 for sp in rs2["scopeSpans"][0]["spans"]]
        assert not [n for n in names if "/health" in n], names
        assert span["traceId"] == trace and span["parentSpanId"] == parent
        assert span["spanId"] == tp[2] and span["name"] == "POST /v1/completions"
        assert span["kind"] == 2
        assert int(span["endTimeUnixNano"]) >= int(span["startTimeUnixNano"]) > 0
        attrs = {a["key"]: a["value"] for a in span["attributes"]}
        assert attrs["http.response.status_code"] == {"intValue": "200"}
        assert attrs["starcloud.replica"] == {"stringValue": "w-otlp"}
    finally:
        srv.shutdown()
