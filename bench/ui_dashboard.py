"""Dashboard responsiveness with a big cluster: N nodes of 8 GPUs and N/2
running 4-GPU jobs applied through the API of a fresh server, then the page
in headless Chromium: time to the first full map, and the cost of derive()
(device use for every node), drawGpus() (one frame of the canvas),
renderRunning() and renderQueues(), averaged over 10 calls.

usage: python3 bench/ui_dashboard.py [N]   (from the repository root, after make build)"""
import concurrent.futures as cf
import json
import os
import sys
import tempfile
import time
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import requests
from conftest import Server, node
from cdp import Browser, require_chromium
d = tempfile.mkdtemp()
srv = Server(os.path.join(d, "data")).start(); srv.read_admin_token()
s = srv.session()
N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
t0 = time.time()
def mk(i):
    n = node("node-%05d" % i, 8)
    r = s.post(s.base + "/nodes", json=n); assert r.status_code == 201, r.text
with cf.ThreadPoolExecutor(8) as ex: list(ex.map(mk, range(N)))
print("nodes created", time.time() - t0)
def mkjob(i):
    j = {"apiVersion": "starcloud.dev/v1", "kind": "Job", "metadata": {"name": "j%05d" % i},
         "spec": {"queue": "q", "tasks": [{"name": "w", "replicas": 4, "resources": {"gpu": 1}}]},
         "status": {"pods": [{"name": "j%05d-w-%d" % (i, k), "phase": "Running", "node": "node-%05d" % i, "gpus": [k]} for k in range(4)]}}
    r = s.post(s.base + "/jobs", json=j); assert r.status_code == 201, r.text
s.post(s.base + "/queues", json={"apiVersion": "starcloud.dev/v1", "kind": "Queue", "metadata": {"name": "q"}, "spec": {}})
with cf.ThreadPoolExecutor(8) as ex: list(ex.map(mkjob, range(0, N, 2)))
print("jobs created", time.time() - t0)
b = Browser(require_chromium())
b.goto(srv.url + "/ui"); b.eval("sessionStorage.clear()"); b.goto(srv.url + "/ui")
b.eval("document.getElementById('token').value=%s;document.getElementById('login-form').requestSubmit()" % json.dumps(srv.token))
t1 = time.time()
b.wait_for("document.getElementById('gpu-summary').innerText.includes('%d nodes')" % N, 60)
print("first map", time.time() - t1)
b.wait_for("document.getElementById('gpu-summary').innerText.includes(' %d whole')" % (N // 2 * 4), 60)
print("with jobs", time.time() - t1)
print(b.text("gpu-summary"))
print(b.eval("""(() => { const o = {}; let t = performance.now(); for (let i = 0; i < 10; i++) derive(); o.derive = (performance.now() - t) / 10;
 t = performance.now(); for (let i = 0; i < 10; i++) drawGpus(); o.draw = (performance.now() - t) / 10;
 t = performance.now(); for (let i = 0; i < 10; i++) renderRunning(); o.running = (performance.now() - t) / 10;
 t = performance.now(); for (let i = 0; i < 10; i++) renderQueues(); o.queues = (performance.now() - t) / 10; return o; })()"""))
# derive and draw timings
r = b.eval("""(async () => {
  const sc = document.getElementById('gpu-scroll');
  const times = [];
  for (let i = 0; i < 30; i++) {
    const t = performance.now();
    sc.scrollTop = i * 997;
    sc.dispatchEvent(new Event('scroll'));
    await new Promise(r => requestAnimationFrame(() => r()));
    times.push(performance.now() - t);
  }
  times.sort((a,b)=>a-b);
  return {median: times[15], max: times[29]};
})()""")
print("scroll frame ms", r)
b.screenshot("bench-10k")
b.close(); srv.stop()
