"""A headless Chromium driven over the Chrome DevTools Protocol (websocket),
for the dashboard tests. Only loopback: the browser is told to make no
background connections, and pages are served by a test's own server."""
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time

import pytest

from conftest import stop_process

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ARTIFACTS = os.path.join(ROOT, "build", "test-artifacts")

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--no-default-browser-check",
         "--metrics-recording-only", "--password-store=basic", "--window-size=1400,1000",
         "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0"]


def chromium_path():
    for name in ("chromium", "chromium-browser", "google-chrome"):
        p = shutil.which(name)
        if p:
            return p
    return None


def require_chromium():
    """The browser, or a skip outside CI (CI installs it through deps.sh)."""
    exe = chromium_path()
    try:
        import websocket  # noqa: F401  (python3-websocket)
    except ImportError:
        exe = None
    if exe:
        return exe
    if os.environ.get("CI") == "true":
        pytest.fail("chromium or python3-websocket missing in CI: scripts/deps.sh installs them")
    pytest.skip("chromium or python3-websocket not installed (scripts/deps.sh installs them)")


class Browser:
    def __init__(self, exe):
        import websocket
        self.dir = tempfile.mkdtemp(prefix="sc-chromium-")
        self.log = open(os.path.join(self.dir, "chromium.log"), "w")
        self.proc = subprocess.Popen([exe] + FLAGS + ["--user-data-dir=" + self.dir,
                                                      "about:blank"],
                                     stdout=self.log, stderr=self.log)
        port_file = os.path.join(self.dir, "DevToolsActivePort")
        deadline = time.time() + 30
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("chromium did not start (see %s)" % self.log.name)
            time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        import urllib.request
        targets = []
        while not targets and time.time() < deadline:
            with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port) as f:
                targets = [t for t in json.load(f) if t.get("type") == "page"]
            if not targets:
                time.sleep(0.1)
        self.ws = websocket.create_connection(targets[0]["webSocketDebuggerUrl"],
                                              suppress_origin=True, timeout=30)
        self.next_id = 0
        self.console = []
        self.call("Page.enable")
        self.call("Runtime.enable")

    def call(self, method, **params):
        self.next_id += 1
        mid = self.next_id
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})
            if msg.get("method") == "Runtime.exceptionThrown":
                self.console.append(msg["params"]["exceptionDetails"].get("text", ""))
            elif msg.get("method") == "Runtime.consoleAPICalled":
                self.console.append(" ".join(str(a.get("value", "")) for a in
                                             msg["params"]["args"]))

    def eval(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            raise RuntimeError("page error: %s" % r["exceptionDetails"])
        return r["result"].get("value")

    def goto(self, url):
        self.call("Page.navigate", url=url)
        self.wait_for("document.readyState === 'complete' && !!window.starcloud", 15)

    def wait_for(self, expr, timeout=30, what=None):  # generous: a loaded CI machine
        deadline = time.time() + timeout
        while True:
            v = self.eval(expr)
            if v:
                return v
            if time.time() > deadline:
                raise AssertionError("timed out waiting for %s" % (what or expr))
            time.sleep(0.1)

    def text(self, element_id):
        return self.eval("document.getElementById(%s).innerText" % json.dumps(element_id))

    def screenshot(self, name):
        os.makedirs(ARTIFACTS, exist_ok=True)
        h = self.eval("Math.max(document.body.scrollHeight, 600)")
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": 0, "width": 1400, "height": h, "scale": 1})["data"]
        path = os.path.join(ARTIFACTS, name + ".png")
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))
        return path

    def close(self):
        try:
            self.ws.close()
        except Exception:
            pass
        stop_process(self.proc)
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    """One browser for a test module (starting Chromium takes seconds)."""
    b = Browser(require_chromium())
    yield b
    b.close()
