"""KServe v2 (Open Inference Protocol) through the gateway and against a
worker, with a client written from the protocol's text (kserve/kserve
docs/predict-api/v2/required_api.md and Triton's binary tensor data and
generate extensions), not from our code: health, server and model metadata,
infer with JSON and with binary tensors both ways, batches, nested data,
generate and generate_stream, and errors in KServe's shape. Answers are
checked against OpenAI completions of the same prompts (greedy: the same
tokens)."""
import json
import struct

import pytest
import requests

from gwutil import procs  # noqa: F401
from test_gateway_worker import ckpt, worker  # noqa: F401


# The v2 protocol's fixed-size datatypes as Python struct formats.
FORMATS = {"BOOL": "?", "INT8": "b", "INT16": "h", "INT32": "i", "INT64": "q", "UINT8": "B",
           "UINT16": "H", "UINT32": "I", "UINT64": "Q", "FP16": "e", "FP32": "f", "FP64": "d"}
INTEGER_TYPES = ["INT8", "INT16", "INT32", "INT64", "UINT8", "UINT16", "UINT32", "UINT64"]
OTHER_TYPES = ["BOOL", "FP16", "BF16", "FP32", "FP64"]


class KServeClient:
    """The protocol as a client sees it."""

    def __init__(self, url):
        self.url = url

    def live(self):
        return requests.get(self.url + "/v2/health/live", timeout=5).status_code == 200

    def ready(self, model=None, version=None):
        path = "/v2/health/ready" if not model else self._model(model, version) + "/ready"
        return requests.get(self.url + path, timeout=5).status_code == 200

    def server_metadata(self):
        return requests.get(self.url + "/v2", timeout=5).json()

    def model_metadata(self, model, version=None):
        return requests.get(self.url + self._model(model, version), timeout=5).json()

    @staticmethod
    def _model(model, version):
        return "/v2/models/%s%s" % (model, "/versions/%s" % version if version else "")

    @staticmethod
    def _encode(datatype, values):
        if datatype == "BYTES":
            out = b""
            for v in values:
                b = v.encode() if isinstance(v, str) else v
                out += struct.pack("<I", len(b)) + b
            return out
        if datatype == "BF16":  # the upper half of an FP32
            return b"".join(struct.pack("<f", v)[2:] for v in values)
        return b"".join(struct.pack("<" + FORMATS[datatype], v) for v in values)

    @staticmethod
    def _decode(datatype, raw, count):
        if datatype == "BYTES":
            out, at = [], 0
            while at < len(raw):
                (n,) = struct.unpack_from("<I", raw, at)
                out.append(raw[at + 4:at + 4 + n].decode())
                at += 4 + n
            return out
        size, fmt = {"INT64": (8, "<q"), "INT32": (4, "<i"), "FP32": (4, "<f")}[datatype]
        return [struct.unpack_from(fmt, raw, i * size)[0] for i in range(count)]

    def infer(self, model, inputs, outputs=None, binary_in=False, binary_out=False,
              parameters=None, version=None, request_id=None):
        """inputs: [(name, datatype, shape, flat values)]; outputs: names.
        Returns (status, {name: (shape, values)} or the error)."""
        head = {"inputs": []}
        if request_id:
            head["id"] = request_id
        params = dict(parameters or {})
        if binary_out:
            params["binary_data_output"] = True
        if params:
            head["parameters"] = params
        blobs = []
        for name, dt, shape, values in inputs:
            t = {"name": name, "datatype": dt, "shape": shape}
            if binary_in:
                raw = self._encode(dt, values)
                t["parameters"] = {"binary_data_size": len(raw)}
                blobs.append(raw)
            else:
                t["data"] = values
            head["inputs"].append(t)
        if outputs:
            head["outputs"] = [{"name": n, "parameters": {"binary_data": binary_out}}
                               for n in outputs]
        body = json.dumps(head).encode()
        headers = {"Content-Type": "application/json"}
        if binary_in:
            headers = {"Inference-Header-Content-Length": str(len(body)),
                       "Content-Type": "application/octet-stream"}
            body += b"".join(blobs)
        r = requests.post(self.url + self._model(model, version) + "/infer", data=body,
                          headers=headers, timeout=30)
        if r.status_code != 200:
            return r.status_code, r.json()
        hl = r.headers.get("Inference-Header-Content-Length")
        raw = r.content
        doc = json.loads(raw[:int(hl)] if hl else raw)
        at = int(hl) if hl else len(raw)
        out = {"_doc": doc}
        for o in doc["outputs"]:
            n = 1
            for d in o["shape"]:
                n *= d
            size = (o.get("parameters") or {}).get("binary_data_size")
            if size is not None:
                vals = self._decode(o["datatype"], raw[at:at + size], n)
                at += size
            else:
                vals = o["data"]
            out[o["name"]] = (o["shape"], vals)
        assert at == len(raw), "trailing bytes in the answer"
        return 200, out

    def generate(self, model, text, **params):
        r = requests.post(self.url + self._model(model, None) + "/generate", timeout=30,
                          json={"text_input": text, "parameters": params})
        return r.status_code, r.json()

    def generate_stream(self, model, text, **params):
        r = requests.post(self.url + self._model(model, None) + "/generate_stream", timeout=30,
                          json={"text_input": text, "parameters": params}, stream=True)
        events = [json.loads(line[6:]) for line in r.iter_lines() if line.startswith(b"data: ")]
        return r.status_code, events


def openai_ids(w, prompt, n):
    r = requests.post(w.url + "/v1/completions", json={"prompt": prompt, "max_tokens": n},
                      timeout=30).json()
    return r["choices"][0]["token_ids"], r["choices"][0]["text"]


@pytest.fixture(params=["gateway", "worker"])
def target(request, procs, ckpt):
    w = worker(procs, ckpt, "3")
    url = procs.gateway([w]).url if request.param == "gateway" else w.url
    return KServeClient(url), w


def test_health_and_metadata(target):
    c, _ = target
    assert c.live() and c.ready() and c.ready("tiny") and c.ready("tiny", "3")
    assert not c.ready("nope")
    assert c.server_metadata()["name"]
    m = c.model_metadata("tiny")
    assert m["name"] == "tiny" and "3" in m["versions"]
    assert {t["name"] for t in m["inputs"]} == {"text_input", "input_ids"}


@pytest.mark.parametrize("binary_in,binary_out", [(False, False), (True, False), (False, True),
                                                  (True, True)])
def test_infer_batch_binary_and_json(target, binary_in, binary_out):
    c, w = target
    prompts = ["Once upon a time", "abc", "the quick brown fox"]
    want = [openai_ids(w, p, 5) for p in prompts]
    st, out = c.infer("tiny", [("text_input", "BYTES", [3, 1], prompts)],
                      outputs=["text_output", "output_ids"], binary_in=binary_in,
                      binary_out=binary_out, parameters={"max_tokens": 5}, request_id="r-1")
    assert st == 200, out
    assert out["_doc"]["id"] == "r-1" and out["_doc"]["model_version"] == "3"
    assert out["text_output"] == ([3], [t for _, t in want])
    shape, ids = out["output_ids"]
    assert shape == [3, 5]
    assert [ids[i * 5:(i + 1) * 5] for i in range(3)] == [i for i, _ in want]


def test_infer_token_ids_nested_and_int32(target):
    c, w = target
    ids, _ = openai_ids(w, "hello", 4)
    prompt = [1, 107, 104, 111, 111, 114]  # BOS + "hello" as byte tokens (id = byte + 3)
    nested = [prompt, prompt]
    for data, dt in ((nested, "INT64"), (nested, "INT32")):
        r = requests.post(c.url + "/v2/models/tiny/infer", timeout=30, json={
            "inputs": [{"name": "input_ids", "datatype": dt, "shape": [2, 6], "data": data}],
            "parameters": {"max_tokens": 4}})
        assert r.status_code == 200, r.text
        o = {x["name"]: x for x in r.json()["outputs"]}
        assert o["output_ids"]["shape"] == [2, 4] and o["output_ids"]["data"] == ids + ids
    st, out = c.infer("tiny", [("input_ids", "INT32", [1, 6], prompt)], binary_in=True,
                      outputs=["output_ids"], parameters={"max_tokens": 4})
    assert st == 200 and out["output_ids"][1] == ids


def test_generate_and_stream(target):
    c, w = target
    ids, text = openai_ids(w, "Once upon a time", 6)
    st, g = c.generate("tiny", "Once upon a time", max_tokens=6)
    assert st == 200 and g["text_output"] == text and g["output_ids"] == ids
    st, evs = c.generate_stream("tiny", "Once upon a time", max_tokens=6)
    assert st == 200 and "".join(e["text_output"] for e in evs) == text
    assert evs[-1]["finish_reason"] == "length"


def test_errors_have_the_kserve_shape(target):
    c, _ = target
    bad = [
        ([("text_input", "FP32", [1], [1.0])], "datatype"),
        ([("text_input", "BYTES", [2], ["x"])], "data"),
        ([("image", "BYTES", [1], ["x"])], "name"),
    ]
    for inputs, needle in bad:
        st, err = c.infer("tiny", inputs)
        assert st == 400 and isinstance(err["error"], str) and needle in err["error"], err
    st, err = c.infer("nope", [("text_input", "BYTES", [1], ["x"])])
    assert st == 404 and isinstance(err["error"], str)
    st, err = c.infer("tiny", [("text_input", "BYTES", [1], ["x"])], version="9")
    assert st == 404 and isinstance(err["error"], str)
    # A binary header length beyond the body.
    r = requests.post(c.url + "/v2/models/tiny/infer", data=b"{}",
                      headers={"Inference-Header-Content-Length": "99"}, timeout=10)
    assert r.status_code == 400 and isinstance(r.json()["error"], str)
    # Binary data that does not match its declared size.
    head = json.dumps({"inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1],
                                   "parameters": {"binary_data_size": 50}}]}).encode()
    r = requests.post(c.url + "/v2/models/tiny/infer", data=head + b"\x03\x00\x00\x00abc",
                      headers={"Inference-Header-Content-Length": str(len(head))}, timeout=10)
    assert r.status_code == 400 and "binary_data_size" in r.json()["error"]


def test_unknown_parameters_refused(target):
    """A parameter the worker does not read (Triton's priority, a tool
    choice) is refused naming it, never ignored; infer and generate alike."""
    c, w = target
    for params, name in (({"priority": 1}, "priority"), ({"tool_choice": "auto"}, "tool_choice"),
                         ({"top_k": 4}, "top_k")):
        st, err = c.infer("tiny", [("text_input", "BYTES", [1], ["x"])],
                          parameters=dict(params, max_tokens=2))
        assert st == 400 and isinstance(err["error"], str) and name in err["error"], err
        st, err = c.generate("tiny", "x", max_tokens=2, **params)
        assert st == 400 and isinstance(err["error"], str) and name in err["error"], err
    r = requests.post(c.url + "/v2/models/tiny/generate", timeout=30,
                      json={"text_input": "x", "max_tokens": 2, "sequence_id": 7})
    assert r.status_code == 400 and "sequence_id" in r.json()["error"]
    st, g = c.generate("tiny", "x", max_tokens=2)
    assert st == 200 and g["output_ids"]


def test_input_ids_every_integer_datatype(target):
    """Token ids in any v2 integer type, JSON and binary, give the answer the
    INT64 ids give."""
    c, _ = target
    ids = [1, 7, 42, 100]
    st, want = c.infer("tiny", [("input_ids", "INT64", [4], ids)], parameters={"max_tokens": 4})
    assert st == 200, want
    for dt in INTEGER_TYPES:
        for binary in (False, True):
            st, got = c.infer("tiny", [("input_ids", dt, [1, 4], ids)], binary_in=binary,
                              parameters={"max_tokens": 4})
            assert st == 200, (dt, binary, got)
            assert got["output_ids"][1] == want["output_ids"][1], (dt, binary)


@pytest.mark.parametrize("binary", [False, True], ids=["json", "binary"])
def test_every_other_datatype_refused_naming_input_and_type(target, binary):
    c, _ = target
    for dt in OTHER_TYPES + ["BYTES"]:
        vals = ["1"] if dt == "BYTES" else [True] if dt == "BOOL" else [1.0]
        st, err = c.infer("tiny", [("input_ids", dt, [1], vals)], binary_in=binary)
        assert st == 400 and "input_ids" in err["error"] and dt in err["error"], (dt, err)
        assert "inputs[0].datatype" in err["error"]
    for dt in OTHER_TYPES + INTEGER_TYPES:
        vals = [True] if dt == "BOOL" else [1.0] if dt in OTHER_TYPES else [1]
        st, err = c.infer("tiny", [("text_input", dt, [1], vals)], binary_in=binary)
        assert st == 400 and "text_input" in err["error"] and dt in err["error"], (dt, err)


def raw_infer(c, head, blob=b""):
    body = json.dumps(head).encode()
    headers = {"Inference-Header-Content-Length": str(len(body))} if blob else {}
    r = requests.post(c.url + "/v2/models/tiny/infer", data=body + blob, headers=headers,
                      timeout=30)
    return r.status_code, r.json()


def tensor(name, dt, shape, **kw):
    return dict({"name": name, "datatype": dt, "shape": shape}, **kw)


def test_bad_tensors_refused_by_kind(target):
    """Each kind of bad tensor gets a 400 in KServe's shape naming what is
    wrong; the worker generates nothing for any of them."""
    c, w = target
    before = requests.get(w.url + "/debug/counters", timeout=5).json()["prefills"]
    ids8 = struct.pack("<4q", 1, 2, 3, 4)
    cases = [
        # Not a v2 datatype, or none.
        ({"inputs": [tensor("input_ids", "FLOAT", [1], data=[1])]}, b"", "FLOAT"),
        ({"inputs": [tensor("input_ids", None, [1], data=[1])]}, b"", "datatype"),
        # Shape and data disagree (flat, nested, and a bad shape).
        ({"inputs": [tensor("input_ids", "INT64", [3], data=[1, 2])]}, b"", "3 INT64"),
        ({"inputs": [tensor("input_ids", "INT64", [2, 2], data=[[1, 2], [3]])]}, b"", "data"),
        ({"inputs": [tensor("input_ids", "INT64", [-1], data=[1])]}, b"", "shape"),
        ({"inputs": [tensor("input_ids", "INT64", [1, 1, 1, 1, 1], data=[1])]}, b"", "shape"),
        # Values of the wrong JSON type or out of the datatype's range.
        ({"inputs": [tensor("input_ids", "INT64", [2], data=[1, "2"])]}, b"", "element 1"),
        ({"inputs": [tensor("input_ids", "INT8", [2], data=[1, 200])]}, b"", "INT8"),
        ({"inputs": [tensor("input_ids", "UINT16", [1], data=[-1])]}, b"", "UINT16"),
        ({"inputs": [tensor("input_ids", "INT64", [1], data=[1.5])]}, b"", "element 0"),
        ({"inputs": [tensor("text_input", "BYTES", [1], data=[5])]}, b"", "BYTES"),
        # Binary data of the wrong byte size for shape x datatype.
        ({"inputs": [tensor("input_ids", "INT64", [3],
                            parameters={"binary_data_size": 32})]}, ids8, "24 bytes, not 32"),
        ({"inputs": [tensor("input_ids", "INT32", [4],
                            parameters={"binary_data_size": 32})]}, ids8, "16 bytes, not 32"),
        ({"inputs": [tensor("input_ids", "INT64", [4],
                            parameters={"binary_data_size": 40})]}, ids8, "binary_data_size"),
        ({"inputs": [tensor("input_ids", "INT64", [4],
                            parameters={"binary_data_size": 24})]}, ids8, "32 bytes, not 24"),
        ({"inputs": [tensor("input_ids", "INT64", [3],
                            parameters={"binary_data_size": 24})]}, ids8, "belong to no input"),
        ({"inputs": [tensor("text_input", "BYTES", [2], parameters={"binary_data_size": 7})]},
         struct.pack("<I", 3) + b"abc", "BYTES elements"),
        ({"inputs": [tensor("text_input", "BYTES", [1], parameters={"binary_data_size": 6})]},
         struct.pack("<I", 9) + b"ab", "4-byte"),
        ({"inputs": [tensor("input_ids", "INT64", [4], data=[1, 2, 3, 4],
                            parameters={"binary_data_size": 32})]}, ids8, "no data beside"),
        # Token ids outside the vocabulary.
        ({"inputs": [tensor("input_ids", "INT64", [1], data=[10 ** 6])]}, b"", "token ids"),
        ({"inputs": [tensor("input_ids", "UINT64", [1], parameters={"binary_data_size": 8})]},
         struct.pack("<Q", 2 ** 64 - 1), "token ids"),
        # Fields nobody reads.
        ({"inputs": [tensor("input_ids", "INT64", [1], data=[1], contents={})]}, b"",
         "inputs[0].contents"),
        ({"inputs": [tensor("input_ids", "INT64", [1], data=[1],
                            parameters={"shared_memory_region": "r"})]}, b"",
         "inputs[0].parameters.shared_memory_region"),
        ({"inputs": [tensor("input_ids", "INT64", [1], data=[1])], "input": []}, b"",
         "input: unknown field"),
        ({"inputs": [tensor("input_ids", "INT64", [1], data=[1])],
          "outputs": [{"name": "output_ids", "parameters": {"classification": 2}}]}, b"",
         "outputs[0].parameters.classification"),
        ({"inputs": [tensor("input_ids", "INT64", [1], data=[1])],
          "outputs": [{"name": "output_ids", "parameters": {"binary_data": 1}}]}, b"",
         "binary_data"),
        ({"inputs": [1]}, b"", "inputs[0]"),
    ]
    for head, blob, needle in cases:
        st, err = raw_infer(c, head, blob)
        assert st == 400 and isinstance(err["error"], str) and needle in err["error"], (head, err)
    after = requests.get(w.url + "/debug/counters", timeout=5).json()["prefills"]
    assert after == before
