"""Gateway and the control plane: deployments watched over a server list
(`--server URL1,URL2,...`), failing over from a dead server and a follower
(503) to the leader, and rollout reports sent to the server that answers."""
import json
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import requests

from conftest import BIN, free_port
from gwutil import completion, procs  # noqa: F401


class FakeServer:
    """A control plane: `leader` serves the deployment watch and records
    rollout reports; a follower answers 503 to everything."""

    def __init__(self, leader, deployment=None):
        self.leader, self.deployment, self.reports, self.watches = leader, deployment, [], 0
        outer = self

        class H(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a):
                pass

            def refuse(self):
                body = b'{"error":"not the leader"}'
                self.send_response(503)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                if not outer.leader:
                    return self.refuse()
                assert self.headers["Authorization"] == "Bearer t0k"
                outer.watches += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/x-ndjson")
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                line = json.dumps({"type": "ADDED", "object": outer.deployment}).encode() + b"\n"
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
                while outer.leader:  # hold the watch open
                    time.sleep(0.05)
                self.close_connection = True  # stepped down: drop the watch

            def do_POST(self):
                if not outer.leader:
                    return self.refuse()
                n = int(self.headers.get("Content-Length", 0))
                outer.reports.append((self.path, json.loads(self.rfile.read(n))))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

        self.port = free_port()
        self.srv = ThreadingHTTPServer(("127.0.0.1", self.port), H)
        self.srv.daemon_threads = True
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()
        self.url = "http://127.0.0.1:%d" % self.port

    def close(self):
        self.leader = False
        self.srv.shutdown()
        self.srv.server_close()


def deployment(endpoints, version="1", rollout=None):
    spec = {"model": "tiny", "version": version}
    if rollout:
        spec["rollout"] = rollout
    return {"metadata": {"name": "tiny-dep"}, "spec": spec, "status": {"endpoints": endpoints}}


def start_gateway(procs, servers):
    port = free_port()
    log = open("%s/gateway-%d.log" % (procs.tmp, port), "w")
    p = subprocess.Popen([BIN, "gateway", "--listen", "127.0.0.1:%d" % port, "--probe-interval",
                          "500ms", "--server", ",".join(servers), "--token", "t0k"],
                         stdout=subprocess.DEVNULL, stderr=log)
    procs.procs.append(p)
    g = type("G", (), {})()
    g.url, g.proc, g.log = "http://127.0.0.1:%d" % port, p, log.name
    return g


def wait_ok(gw, timeout=15):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            if completion(gw, max_tokens=1).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        time.sleep(0.1)
    raise AssertionError("the gateway never routed: " + open(gw.log).read())


def test_watch_fails_over_to_the_leader(procs):
    w = procs.worker("1")
    dead = "http://127.0.0.1:%d" % free_port()  # nothing listens there
    follower = FakeServer(False)
    leader = FakeServer(True, deployment([{"url": w.url, "version": "1"}]))
    try:
        gw = start_gateway(procs, [dead, follower.url, leader.url + "/"])
        wait_ok(gw)
        r = completion(gw, max_tokens=2)
        assert r.status_code == 200 and r.headers["x-starcloud-replica"] == "127.0.0.1:%d" % w.port
        assert leader.watches == 1
        # The leader steps down and another server takes over: the gateway
        # follows it round the list and keeps serving meanwhile.
        follower.deployment = deployment([{"url": w.url, "version": "1"}])
        follower.leader = True
        leader.leader = False
        deadline = time.time() + 30
        while follower.watches == 0 and time.time() < deadline:
            assert completion(gw, max_tokens=1).status_code == 200
            time.sleep(0.05)
        assert follower.watches >= 1
    finally:
        follower.close()
        leader.close()


def test_rollout_report_goes_to_the_leader(procs):
    v1 = procs.worker("1")
    v2 = procs.worker("2", "both", "tiny", "--fail-rate", "1", "--fail-status", "500")
    follower = FakeServer(False)
    leader = FakeServer(True, deployment(
        [{"url": v1.url, "version": "1"}, {"url": v2.url, "version": "2"}], version="2",
        rollout={"steps": [50, 100], "analysisWindow": "1s", "maxErrorRate": 0.05}))
    try:
        gw = start_gateway(procs, [follower.url, leader.url])
        wait_ok(gw)
        deadline = time.time() + 30

        def outcomes():
            return [b for p, b in leader.reports if p == "/api/v1/deployments/tiny-dep/rollout"]
        while not outcomes() and time.time() < deadline:
            completion(gw, max_tokens=1)
            time.sleep(0.01)
        # The follower took the first try of each report or none: either way
        # the leader has them: the window that failed, per version, then the
        # outcome.
        assert outcomes(), open(gw.log).read()
        body = outcomes()[0]
        assert body["outcome"] == "rolled_back" and body["action"] == "abort"
        assert body["stable"] == "1" and body["canary"] == "2" and body["source"] == "gateway"
        windows = [b for p, b in leader.reports
                   if p == "/api/v1/deployments/tiny-dep/rollout/report"]
        canary = [w for w in windows if w["version"] == "2"]
        assert canary and canary[0]["requests"] >= 1
        assert canary[0]["errors"] == canary[0]["requests"]  # --fail-rate 1
        assert any(w["version"] == "1" for w in windows)
    finally:
        follower.close()
        leader.close()


def test_bad_server_list_exits_2():
    for servers in ("http://127.0.0.1:1,ftp://x", "http://127.0.0.1:1,,http://127.0.0.1:2",
                    "http://127.0.0.1:1/api", ",".join(["http://127.0.0.1:%d" % p
                                                        for p in range(1, 11)])):
        p = subprocess.run([BIN, "gateway", "--server", servers, "--token", "t"],
                           capture_output=True, text=True, timeout=5)
        assert p.returncode == 2, (servers, p.stderr)
        assert "gateway: --server" in p.stderr
