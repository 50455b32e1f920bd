"""Lists served from the server's object cache: ?limit=&continue= paging,
streamed (chunked) answers for large lists, and reads that follow writes."""
import requests

from conftest import node


def names(items):
    return [o["metadata"]["name"] for o in items]


def big_node(i):
    n = node("n-%03d" % i, labels={"rack": "r%d" % (i % 3)})
    # A large annotation makes a few objects add up to a streamed answer.
    n["metadata"]["annotations"] = {"note": "x" * 4000}
    return n


def test_paging_walks_every_object_once(admin):
    for i in range(25):
        assert admin.post(admin.base + "/nodes", json=node("n-%03d" % i)).status_code == 201
    seen, token, pages = [], None, 0
    while True:
        url = admin.base + "/nodes?limit=10" + ("&continue=" + token if token else "")
        r = admin.get(url)
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["kind"] == "NodeList" and len(body["items"]) <= 10
        seen += names(body["items"])
        pages += 1
        token = body["metadata"].get("continue")
        if not token:
            break
    assert pages == 3
    assert seen == ["n-%03d" % i for i in range(25)]
    assert seen == names(admin.get(admin.base + "/nodes").json()["items"])


def test_paging_with_selector(admin):
    for i in range(12):
        n = node("n-%03d" % i, labels={"rack": "r%d" % (i % 3)})
        assert admin.post(admin.base + "/nodes", json=n).status_code == 201
    r = admin.get(admin.base + "/nodes?labelSelector=rack%3Dr1&limit=2").json()
    assert names(r["items"]) == ["n-001", "n-004"]
    r = admin.get(admin.base + "/nodes?labelSelector=rack%3Dr1&limit=2&continue=" +
                  r["metadata"]["continue"]).json()
    assert names(r["items"]) == ["n-007", "n-010"]
    assert "continue" not in r["metadata"]


def test_bad_paging_is_400_and_names_the_field(admin):
    for q, field in (("limit=-1", "limit"), ("limit=x", "limit"), ("limit=100001", "limit"),
                     ("limit=", "limit"), ("continue=", "continue"),
                     ("continue=NOT_A_NAME", "continue")):
        r = admin.get(admin.base + "/nodes?" + q)
        assert r.status_code == 400, q
        assert r.json()["error"]["field"] == field, q


def test_large_list_is_streamed_and_complete(server, admin):
    for i in range(90):
        assert admin.post(admin.base + "/nodes", json=big_node(i)).status_code == 201
    r = admin.get(admin.base + "/nodes")
    assert r.status_code == 200
    assert r.headers.get("Transfer-Encoding") == "chunked"
    body = r.json()
    assert names(body["items"]) == ["n-%03d" % i for i in range(90)]
    assert all(o["metadata"]["resourceVersion"] for o in body["items"])
    # A small page of the same collection is a plain answer.
    r = admin.get(admin.base + "/nodes?limit=5")
    assert "Content-Length" in r.headers and len(r.json()["items"]) == 5


def test_reads_follow_writes(admin):
    created = admin.post(admin.base + "/nodes", json=node("n-1")).json()
    got = admin.get(admin.base + "/nodes/n-1").json()
    assert got == created
    got["metadata"]["labels"] = {"zone": "b"}
    put = admin.put(admin.base + "/nodes/n-1", json=got).json()
    assert admin.get(admin.base + "/nodes/n-1").json() == put
    listed = admin.get(admin.base + "/nodes").json()
    assert listed["items"] == [put]
    assert int(listed["metadata"]["resourceVersion"]) >= int(put["metadata"]["resourceVersion"])
    assert admin.delete(admin.base + "/nodes/n-1").status_code == 200
    assert admin.get(admin.base + "/nodes/n-1").status_code == 404
    assert admin.get(admin.base + "/nodes").json()["items"] == []


def test_tenant_list_sees_only_its_queues(server, admin):
    from conftest import job, queue
    for q in ("team-a", "team-b"):
        assert admin.post(admin.base + "/queues", json=queue(q)).status_code == 201
    for i in range(4):
        q = "team-a" if i % 2 == 0 else "team-b"
        assert admin.post(admin.base + "/jobs", json=job("j-%d" % i, q=q)).status_code == 201
    tok = admin.post(admin.base + "/tokens", json={"role": "tenant", "queues": ["team-a"]})
    tenant = server.session(tok.json()["token"])
    r = tenant.get(tenant.base + "/jobs?limit=1").json()
    assert names(r["items"]) == ["j-0"]
    assert r["metadata"]["continue"] == "j-0"  # never another queue's name
    r = tenant.get(tenant.base + "/jobs?limit=1&continue=" + r["metadata"]["continue"]).json()
    assert names(r["items"]) == ["j-2"]
    assert tenant.get(tenant.base + "/jobs/j-1").status_code == 404
    assert requests.get(server.url + "/api/v1/jobs").status_code == 401
