"""CRUD of every kind, optimistic concurrency, merge patch, label selectors
and watch against a real server."""
import time
import json
import re
import socket
import threading

import pytest
import requests

from conftest import EXAMPLES, job, node, queue, settled


@pytest.mark.parametrize("plural", sorted(EXAMPLES))
def test_crud_every_kind(admin, plural):
    base = admin.base + "/" + plural
    obj = EXAMPLES[plural]("obj-1")
    r = admin.post(base, json=obj)
    assert r.status_code == 201, r.text
    rv = r.json()["metadata"]["resourceVersion"]
    assert int(rv) > 0
    assert r.json()["metadata"]["creationTimestamp"]

    assert admin.post(base, json=obj).status_code == 409  # exists

    got = settled(admin, base + "/obj-1") if plural in ("jobs", "deployments") else \
        admin.get(base + "/obj-1").json()
    assert got["spec"] == obj["spec"]

    lst = admin.get(base).json()
    assert [o["metadata"]["name"] for o in lst["items"]] == ["obj-1"]
    assert int(lst["metadata"]["resourceVersion"]) >= int(rv)

    # Jobs and deployments have server-written status (the scheduling loop, the deployment
    # controller) that may move the resourceVersion at any time: a client re-reads and
    # retries on 409, as a Kubernetes client does. Other kinds must succeed at once.
    for _ in range(10 if plural in ("jobs", "deployments") else 1):
        got["metadata"]["labels"] = {"tier": "gold"}
        r = admin.put(base + "/obj-1", json=got)
        if r.status_code != 409:
            break
        time.sleep(0.1)
        got = admin.get(base + "/obj-1").json()
    assert r.status_code == 200, r.text
    assert int(r.json()["metadata"]["resourceVersion"]) > int(rv)

    r = admin.patch(base + "/obj-1", json={"metadata": {"labels": {"tier": None, "x": "y"}}},
                    headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text
    assert r.json()["metadata"]["labels"] == {"x": "y"}

    assert admin.delete(base + "/obj-1").status_code == 200
    assert admin.get(base + "/obj-1").status_code == 404
    assert admin.delete(base + "/obj-1").status_code == 404


def test_stale_resource_version_is_409(admin):
    base = admin.base + "/jobs"
    admin.post(base, json=job("j"))
    first = settled(admin, base + "/j")
    second = dict(first)
    r = admin.put(base + "/j", json=first)
    assert r.status_code == 200
    # `second` still carries the old resourceVersion.
    second["metadata"] = dict(first["metadata"], labels={"late": "yes"})
    r = admin.put(base + "/j", json=second)
    assert r.status_code == 409
    err = r.json()["error"]
    assert err["code"] == 409 and err["field"] == "metadata.resourceVersion"
    assert "late" not in json.dumps(admin.get(base + "/j").json())
    # A PATCH naming a stale version is refused as well.
    r = admin.patch(base + "/j", json={"metadata": {"resourceVersion": first["metadata"]["resourceVersion"],
                                                    "labels": {"a": "b"}}})
    assert r.status_code == 409


def test_put_requires_existing_and_matching_name(admin):
    base = admin.base + "/jobs"
    assert admin.put(base + "/nope", json=job("nope")).status_code == 404
    admin.post(base, json=job("a"))
    r = admin.put(base + "/a", json=job("b"))
    assert r.status_code == 400 and r.json()["error"]["field"] == "metadata.name"


def test_label_selector(admin):
    base = admin.base + "/nodes"
    admin.post(base, json=node("n1", labels={"zone": "z1"}))
    admin.post(base, json=node("n2", labels={"zone": "z2"}))
    names = lambda sel: [o["metadata"]["name"] for o in
                         admin.get(base, params={"labelSelector": sel}).json()["items"]]
    assert names("zone=z1") == ["n1"]
    assert names("zone!=z1") == ["n2"]
    assert names("zone") == ["n1", "n2"]
    assert names("missing") == []
    assert admin.get(base, params={"labelSelector": "=x"}).status_code == 400


def read_events(resp, n):
    out = []
    for line in resp.iter_lines():
        if line:
            out.append(json.loads(line))
        if len(out) == n:
            break
    return out


def test_watch_from_revision(admin):
    # Nodes: the scheduler writes job statuses, which would add MODIFIED events.
    base = admin.base + "/nodes"
    rv = admin.get(base).json()["metadata"]["resourceVersion"]
    admin.post(base, json=node("w1"))
    with admin.get(base, params={"watch": "1", "resourceVersion": rv}, stream=True,
                   timeout=10) as resp:
        assert resp.status_code == 200
        # Later changes arrive on the open stream.
        def writer():
            admin2 = requests.Session()
            admin2.headers.update(admin.headers)
            admin2.patch(base + "/w1", json={"metadata": {"labels": {"a": "b"}}})
            admin2.delete(base + "/w1")
        threading.Timer(0.2, writer).start()
        evs = read_events(resp, 3)
    assert [e["type"] for e in evs] == ["ADDED", "MODIFIED", "DELETED"]
    assert all(e["object"]["metadata"]["name"] == "w1" for e in evs)
    revs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
    assert revs == sorted(revs)


def test_watch_without_revision_lists_first(admin):
    base = admin.base + "/queues"
    admin.post(base, json={"apiVersion": "starcloud.dev/v1", "kind": "Queue",
                           "metadata": {"name": "q1"}})
    with admin.get(base, params={"watch": "true"}, stream=True, timeout=10) as resp:
        evs = read_events(resp, 1)
    assert evs[0]["type"] == "ADDED" and evs[0]["object"]["metadata"]["name"] == "q1"


def test_watch_bad_revision(admin):
    r = admin.get(admin.base + "/jobs", params={"watch": "1", "resourceVersion": "x"})
    assert r.status_code == 400 and r.json()["error"]["field"] == "resourceVersion"


def test_health_and_metrics(server, admin):
    assert requests.get(server.url + "/healthz").text == "ok\n"
    admin.get(admin.base + "/jobs")
    # /metrics names every queue: it takes an admin or viewer token.
    assert requests.get(server.url + "/metrics").status_code == 401
    text = admin.get(server.url + "/metrics").text
    # A tenant sees its own queues' series and the cluster-wide ones only.
    admin.post(admin.base + "/queues", json=queue("qa"))
    admin.post(admin.base + "/queues", json=queue("qb"))
    tok = admin.post(admin.base + "/tokens", json={"role": "tenant", "queues": ["qa"]}).json()
    # A scheduling cycle publishes the queue series: wait for it (cycles
    # run every second, later on a loaded machine).
    deadline = time.time() + 30
    full = ""
    while not ('queue="qb"' in full and 'queue="qa"' in full) and time.time() < deadline:
        time.sleep(0.1)
        full = admin.get(server.url + "/metrics").text
    mine = server.session(tok["token"]).get(server.url + "/metrics").text
    assert 'queue="qb"' in full and 'queue="qa"' in full
    assert 'queue="qb"' not in mine and 'queue="qa"' in mine
    assert 'starcloud_api_requests_total{method="GET",route="/api/v1/",code="200"}' in text
    assert "starcloud_api_request_duration_seconds_bucket" in text
    assert "starcloud_schedule_cycle_duration_seconds_count" in text
    assert requests.get(server.url + "/readyz").status_code in (200, 503)


def raw(server, data, read=65536):
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            b = s.recv(read)
            if not b:
                break
            chunks.append(b)
        return b"".join(chunks)


def test_pipelined_requests_answered_in_order(server):
    auth = ("Authorization: Bearer %s\r\n" % server.token).encode()
    req = lambda path: b"GET " + path + b" HTTP/1.1\r\nHost: x\r\n" + auth + b"\r\n"
    out = raw(server, req(b"/healthz") + req(b"/api/v1/nodes") + req(b"/api/v1/bogus"))
    codes = re.findall(rb"HTTP/1\.1 (\d{3}) ", out)
    assert codes == [b"200", b"200", b"404"]


def test_oversized_body_is_413(server, admin):
    # Past --max-body (3 MiB by default): refused before the body is read.
    big = json.dumps(job("big", labels={"pad": "x" * (4 << 20)}))
    r = admin.post(admin.base + "/jobs", data=big)
    assert r.status_code == 413
    assert admin.get(admin.base + "/jobs/big").status_code == 404


def test_oversized_headers_431(server):
    out = raw(server, b"GET /healthz HTTP/1.1\r\nX-Pad: " + b"a" * 40000 + b"\r\n\r\n")
    assert out.startswith(b"HTTP/1.1 431")


def test_malformed_http_is_400(server):
    assert raw(server, b"NOT HTTP AT ALL\r\n\r\n").startswith(b"HTTP/1.1 400")
