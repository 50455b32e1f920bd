"""The worker's Triton model repository (`--model-repository DIR`: Triton's
layout, a config.pbtxt per model, version policies), its index, load and
unload API, and the gateway routing to the versions each replica reports
(`repository=true` backends and Deployments with `modelRepository: true`)."""
import os
import subprocess
import threading
import time

import pytest
import requests

from agent_util import Agent, setup_queue, wait_for
from conftest import BIN, CKPT_MICRO, free_port, gen_checkpoint, manifest, pod_program, stop_process
from test_serving import free_port as serving_ports
from test_worker import Worker
from gwutil import Procs, procs  # noqa: F401


def gen(path, seed):
    gen_checkpoint(path, **dict(CKPT_MICRO, vocab=300, seed=seed))


def config(policy="", extra=""):
    return 'name: "tiny"\nbackend: "starcloud_llama2c"\nmax_batch_size: 8\n%s\n%s\n' % (
        policy, extra)


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    d = tmp_path_factory.mktemp("ckpts")
    for s in (1, 2, 3, 4):
        gen(d / ("s%d.bin" % s), s)
    return d


def make_repo(root, ckpts, policy=""):
    repo = root / "repo"
    for v, s in ((1, 1), (2, 2), (3, 3)):
        (repo / "tiny" / str(v)).mkdir(parents=True)
        os.link(ckpts / ("s%d.bin" % s), repo / "tiny" / str(v) / "model.bin")
    (repo / "tiny" / "config.pbtxt").write_text(config(policy))
    (repo / "other" / "1").mkdir(parents=True)
    os.link(ckpts / "s4.bin", repo / "other" / "1" / "model.bin")
    (repo / "other" / "config.pbtxt").write_text('name: "other"\n')
    return repo


class RepoWorker(Worker):
    """A worker serving the model repository repo (test_worker.Worker)."""

    def __init__(self, repo, *extra, tmp):
        super().__init__(repo, *extra, tmp=tmp, repo=True)

    def index(self, ready=False):
        r = requests.post(self.url + "/v2/repository/index", json={"ready": ready}, timeout=5)
        assert r.status_code == 200, r.text
        return sorted((e["name"], e.get("version"), e["state"]) for e in r.json())

    def op(self, model, what):
        return requests.post(self.url + "/v2/repository/models/%s/%s" % (model, what), timeout=30)

    def complete(self, model, n=6, **kw):
        return requests.post(self.url + "/v1/completions", timeout=30,
                             json=dict({"model": model, "prompt": "hello", "max_tokens": n}, **kw))


def direct_text(ckpts, seed, tmp):
    """The answer of a worker serving that checkpoint alone."""
    port = free_port()
    p = subprocess.Popen([BIN, "worker", "--checkpoint", str(ckpts / ("s%d.bin" % seed)),
                          "--listen", "127.0.0.1:%d" % port], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        url = "http://127.0.0.1:%d" % port

        def up():
            try:
                return requests.get(url + "/healthz", timeout=0.5).ok
            except requests.RequestException:
                return False
        wait_for(up, timeout=30, what="the reference worker")
        return requests.post(url + "/v1/completions", json={"prompt": "hello", "max_tokens": 6},
                             timeout=10).json()["choices"][0]["text"]
    finally:
        stop_process(p)


def test_layout_policies_and_routing_by_version(ckpts, tmp_path):
    repo = make_repo(tmp_path, ckpts)  # no version_policy: Triton's latest 1
    w = RepoWorker(repo, tmp=tmp_path)
    try:
        assert w.index() == [("other", "1", "READY"), ("tiny", "3", "READY")]
        want = {s: direct_text(ckpts, s, tmp_path) for s in (1, 2, 3)}
        r = w.complete("tiny")
        assert r.status_code == 200 and r.json()["choices"][0]["text"] == want[3]
        assert w.complete("tiny:1").status_code == 404
        assert w.complete("other").status_code == 200
        assert requests.post(w.url + "/v1/completions", json={"prompt": "x"}).status_code == 400
        meta = requests.get(w.url + "/v2/models/tiny").json()
        assert meta["versions"] == ["3"]
        assert "model_repository" in requests.get(w.url + "/v2").json()["extensions"]
        # specific [1, 3], then all, then latest 2: each by a load of the model.
        for policy, served in (("version_policy: { specific { versions: [1, 3] } }", ["1", "3"]),
                               ("version_policy: { all {} }", ["1", "2", "3"]),
                               ("version_policy: { latest { num_versions: 2 } }", ["2", "3"])):
            (repo / "tiny" / "config.pbtxt").write_text(config(policy))
            r = w.op("tiny", "load")
            assert r.status_code == 200, r.text
            assert [v for n, v, _ in w.index() if n == "tiny"] == served
            for v in served:
                got = w.complete("tiny:%s" % v).json()["choices"][0]["text"]
                assert got == want[int(v)], v
        # KServe paths take the version too.
        r = requests.post(w.url + "/v2/models/tiny/versions/2/infer", timeout=10, json={
            "inputs": [{"name": "text_input", "datatype": "BYTES", "shape": [1],
                        "data": ["hello"]}], "parameters": {"max_tokens": 6}})
        assert r.json()["outputs"][0]["data"] == [want[2]]
    finally:
        w.stop()


def test_failed_reload_keeps_what_was_served(ckpts, tmp_path):
    repo = make_repo(tmp_path, ckpts, "version_policy: { specific { versions: [2] } }")
    w = RepoWorker(repo, tmp=tmp_path)
    try:
        before = w.complete("tiny").json()["choices"][0]["text"]
        cases = [
            (config("version_policy: { specific { versions: [9] } }"), "version 9"),
            (config("", "dynamic_batching {}\nbogus_field: 1"), "bogus_field"),
            ('name: "nottiny"\n', "name"),
            ('name: "tiny"\nbackend: "onnxruntime"\n', "backend"),
            ("name: \"tiny\nx", "line 1"),
            (config("version_policy: { latest { num_versions: 0 } }"), "num_versions"),
        ]
        for text, needle in cases:
            (repo / "tiny" / "config.pbtxt").write_text(text)
            r = w.op("tiny", "load")
            assert r.status_code == 400 and needle in r.json()["error"], (text, r.text)
            assert ("tiny", "2", "READY") in w.index()
            assert w.complete("tiny").json()["choices"][0]["text"] == before
        # A truncated checkpoint in a new version: refused, the old one kept.
        (repo / "tiny" / "config.pbtxt").write_text(config("version_policy: { all {} }"))
        (repo / "tiny" / "4").mkdir()
        (repo / "tiny" / "4" / "model.bin").write_bytes(b"\x01\x02\x03")
        r = w.op("tiny", "load")
        assert r.status_code == 400 and "version 4" in r.json()["error"]
        assert [v for n, v, _ in w.index() if n == "tiny"] == ["2"]
        idx = requests.post(w.url + "/v2/repository/index", json={}).json()
        assert all(e["state"] == "READY" for e in idx if e["name"] == "tiny")
        assert w.op("nope", "load").status_code == 404
        assert w.op("../etc", "load").status_code in (400, 404)
    finally:
        w.stop()


def test_unload_lets_requests_in_flight_finish(ckpts, tmp_path):
    repo = make_repo(tmp_path, ckpts)
    w = RepoWorker(repo, "--max-tokens", "60", tmp=tmp_path)
    try:
        got = {}

        def long_one():
            got["r"] = w.complete("tiny", n=60, stream=True)
            got["text"] = got["r"].text
        t = threading.Thread(target=long_one)
        t.start()
        time.sleep(0.05)
        assert w.op("tiny", "unload").status_code == 200
        t.join()
        assert got["r"].status_code == 200 and "[DONE]" in got["text"]
        assert ("tiny", None, "UNAVAILABLE") in w.index()
        assert w.complete("tiny").status_code == 404
        assert w.index(ready=True) == [("other", "1", "READY")]
        assert w.op("tiny", "load").status_code == 200
        assert w.complete("tiny").status_code == 200
    finally:
        w.stop()


def test_explicit_mode_and_bad_start(ckpts, tmp_path):
    repo = make_repo(tmp_path, ckpts)
    w = RepoWorker(repo, "--model-control-mode", "explicit", "--load-model", "other",
                   tmp=tmp_path)
    try:
        assert w.index() == [("other", "1", "READY"), ("tiny", None, "UNAVAILABLE")]
        assert w.complete("tiny").status_code == 404
        assert w.op("tiny", "load").status_code == 200
        assert w.complete("tiny").status_code == 200
    finally:
        w.stop()
    (repo / "tiny" / "config.pbtxt").write_text(config("", "max_batch_size: -3"))
    for args, needle in ((["--model-repository", str(repo)], "max_batch_size"),
                         (["--model-repository", str(tmp_path / "none")], "not a directory"),
                         (["--model-repository", str(repo), "--checkpoint", "x"], "--checkpoint"),
                         (["--load-model", "tiny"], "--load-model")):
        p = subprocess.run([BIN, "worker"] + args, capture_output=True, text=True, timeout=20)
        assert p.returncode == 2 and needle in p.stderr, (args, p.stderr)


def test_gateway_routes_to_the_versions_each_replica_reports(ckpts, tmp_path, procs):
    ra = make_repo(tmp_path / "a", ckpts)  # serves tiny 3
    rb = make_repo(tmp_path / "b", ckpts, "version_policy: { specific { versions: [2, 3] } }")
    a, b = RepoWorker(ra, tmp=tmp_path), RepoWorker(rb, tmp=tmp_path)
    try:
        # a by flag, b from a config file.
        cfg = tmp_path / "gw.yaml"
        cfg.write_text("backends:\n  - {url: \"%s\", repository: true}\n" % b.url)
        gw = procs.gateway([], "--backend", "url=%s,repository=true" % a.url,
                           "--config", str(cfg))

        def post(model):
            return requests.post(gw.url + "/v1/completions", timeout=10,
                                 json={"model": model, "prompt": "hello", "max_tokens": 3})
        wait_for(lambda: post("tiny:2").status_code == 200, timeout=15, what="discovery")
        for _ in range(10):
            r = post("tiny:2")
            assert r.headers["x-starcloud-replica"] == "127.0.0.1:%d" % b.port
        seen = {post("tiny:3").headers["x-starcloud-replica"] for _ in range(30)}
        assert seen == {"127.0.0.1:%d" % a.port, "127.0.0.1:%d" % b.port}
        models = requests.get(gw.url + "/v1/models").json()["data"]
        assert {m["id"]: sorted(m["versions"]) for m in models} == {"tiny": ["2", "3"],
                                                                    "other": ["1"]}
        # b unloads tiny: version 2 has no replica left, 3 only a.
        assert b.op("tiny", "unload").status_code == 200
        # Before the gateway polls again, a request that reaches b is moved
        # to a replica that serves its version (a's 3), or gets b's 404.
        def versions():
            ms = requests.get(gw.url + "/v1/models").json()["data"]
            return {m["id"]: sorted(m["versions"]) for m in ms}
        wait_for(lambda: versions().get("tiny") == ["3"], timeout=15, what="the unload seen")
        r = post("tiny:2")
        assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
        assert {post("tiny:3").headers["x-starcloud-replica"] for _ in range(10)} == {
            "127.0.0.1:%d" % a.port}
    finally:
        a.stop()
        b.stop()


def test_deployment_with_a_model_repository(ckpts, server, admin, tmp_path):
    s = admin
    setup_queue(s)
    repo = make_repo(tmp_path, ckpts, "version_policy: { latest { num_versions: 2 } }")
    agents = [Agent(server.url, server.token, "n%d" % i, tmp_path / ("a%d" % i))
              for i in range(2)]
    procs = Procs(tmp_path)
    # Below the ephemeral range: the server hands out port and port + 1, and
    # a client socket of another process once held port + 1 (test_serving).
    port = serving_ports()
    try:
        tpl = {"command": [pod_program(BIN), "worker", "--model-repository", str(repo), "--listen",
                           "127.0.0.1:$(STARCLOUD_PORT)"], "port": port,
               "resources": {"cpu": "100m", "memory": "64Mi"},
               "probes": {"readiness": {"http": {"path": "/v2/health/ready", "port": port},
                                        "periodSeconds": 1}}}
        d = manifest("Deployment", "repo", {"queue": "q", "model": "tiny", "replicas": 2,
                                            "modelRepository": True, "template": tpl})
        assert s.post(s.base + "/deployments", json=d).status_code == 201, d
        eps = wait_for(lambda: (lambda e: e if len(e) == 2 else None)(
            s.get(s.base + "/deployments/repo").json().get("status", {}).get("endpoints", [])),
            timeout=40, what="2 endpoints")
        assert all(e["repository"] is True for e in eps)
        gw = procs.gateway([], "--server", server.url, "--token", server.token)
        for model in ("tiny:2", "tiny:3", "other"):
            r = wait_for(lambda: (lambda r: r if r.status_code == 200 else None)(
                requests.post(gw.url + "/v1/completions", timeout=10,
                              json={"model": model, "prompt": "x", "max_tokens": 2})),
                timeout=20, what=model)
            assert r.headers["x-starcloud-version"] == model.split(":")[-1] if ":" in model \
                else True
        r = requests.post(gw.url + "/v1/completions", timeout=10,
                          json={"model": "tiny:1", "prompt": "x", "max_tokens": 2})
        assert r.status_code == 404  # not in the policy: no replica reports it
        bad = manifest("Deployment", "bad", {"queue": "q", "model": "m", "template": tpl,
                                             "modelRepository": "yes"})
        r = s.post(s.base + "/deployments", json=bad)
        assert r.status_code == 400 and r.json()["error"]["field"] == "spec.modelRepository"
    finally:
        procs.stop()
        for a in agents:
            a.stop()
