"""The official OpenAI Node SDK (npm `openai` 6.x) against the gateway and
against a worker directly: completions, chat, embeddings and models, each
whole and streamed where the API streams; prompt arrays, n, logprobs,
max_completion_tokens, the developer role, content parts, usage only when
asked in a stream; errors arrive as the SDK's typed errors (NotFoundError,
BadRequestError, ...) with type, param and code; a stream left early or
aborted cancels its generation on the worker. What the SDK saw is compared
with the same requests sent to the worker with plain HTTP."""
import time

import pytest
import requests

from gwutil import procs  # noqa: F401
from nodeutil import run_node
from test_gateway_worker import counters, worker


def direct(w, path, body):
    r = requests.post(w.url + path, json=body, timeout=30)
    assert r.status_code == 200, r.text
    return r.json()


def check(out, w):
    want = direct(w, "/v1/completions", {"prompt": "Once upon a time", "max_tokens": 12})
    assert out["completion"]["text"] == want["choices"][0]["text"]
    assert out["completion"]["usage"] == want["usage"]
    assert out["completion_stream"]["text"] == want["choices"][0]["text"]
    assert [m["index"] for m in out["multi"]] == [0, 1, 2, 3]
    assert all(m["lp"] == 4 and m["top"] == 2 for m in out["multi"])
    alone = direct(w, "/v1/completions", {"prompt": "xyz", "max_tokens": 4, "temperature": 1,
                                          "seed": 5})
    assert out["multi"][2]["text"] == alone["choices"][0]["text"]
    assert out["max_completion_tokens"] == 3
    assert [c["index"] for c in out["chat"]] == [0, 1]
    assert all(c["role"] == "assistant" and c["lp"] == 8 and c["top"] == 2 for c in out["chat"])
    assert out["chat"][0]["content"] == out["chat_system"]  # developer = system
    # Unsupported fields at their neutral values change nothing.
    assert out["chat_neutral"] == out["chat_helper"]
    cs = out["chat_stream"]
    assert cs["usageChunks"] == 1 and cs["usage"]["completion_tokens"] == 8
    assert cs["role"] == "assistant"
    assert out["chat_stream_no_usage"] == 0
    assert out["chat_helper"] == cs["text"]
    e = out["embeddings"]
    assert e == {"n": 2, "dim": 256, "same": True, "norm": pytest.approx(1, abs=1e-5),
                 "dims8": 8}
    assert out["models"] == ["tiny"] and out["model"] == "tiny"
    for k in ("model_missing", "err_unknown_model"):
        assert out[k]["class"] == "NotFoundError" and out[k]["status"] == 404, out[k]
        assert out[k]["code"] == "model_not_found" and out[k]["param"] == "model"
    for k, param in (("err_bad_temperature", "temperature"), ("err_bad_max_tokens", "max_tokens"),
                     ("err_content_part", "messages[0].content[0].type"),
                     ("err_stream_error", "logprobs"), ("err_tool_choice", "tool_choice"),
                     ("err_tools", "tools"), ("err_response_format", "response_format"),
                     ("err_unknown_field", "top_k")):
        assert out[k]["class"] == "BadRequestError" and out[k]["isAPIError"], out[k]
        assert out[k]["type"] == "invalid_request_error" and out[k]["param"] == param, out[k]
    assert out["abort_break_chunks"] == 2


def wait_cancelled(w, n):
    deadline = time.time() + 20
    while time.time() < deadline:
        c = counters(w)
        if c["cancelled"] >= n and c["sequences_running"] == 0:
            return c
        time.sleep(0.1)
    raise AssertionError(counters(w))


# A model slow enough that a stream left after two chunks is still being
# generated when the client goes: its cancellation is then visible.
def test_sdk_through_the_gateway(procs, slow_ckpt):
    w = worker(procs, str(slow_ckpt))
    gw = procs.gateway([w])
    out = run_node("sdk_calls.mjs", gw.url, "tiny")
    check(out, w)
    c = wait_cancelled(w, 2)  # the stream left with break and the aborted one
    assert c["kv_cache_bytes"] == 0


def test_sdk_against_a_worker(procs, slow_ckpt):
    w = worker(procs, str(slow_ckpt))
    out = run_node("sdk_calls.mjs", w.url, "tiny")
    check(out, w)
    wait_cancelled(w, 2)
