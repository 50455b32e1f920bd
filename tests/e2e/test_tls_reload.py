"""Certificate rotation without a restart (docs/SECURITY.md, Rotating
certificates): every daemon reloads its certificate, key and CA bundles
on SIGHUP and when the files change (net/tlsreload.c). The files are
replaced the way cert-manager and Kubernetes secret volumes do it, by
rename; certificates come from the openssl command (tls_util.py).

Every wait is for a condition, with a deadline far above the 2 s poll (a
loaded 2-core machine); nothing assumes a poll happened by a given time.
The one negative check (the files changed, polling is off, the old
certificate is still served) cannot be won by a slow machine."""
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import time

import pytest
import requests

from agent_util import wait_for
from conftest import BIN, free_port, stop_process
from test_metrics_lint import lint
from tls_util import issue, issue_client, issue_expired, make_ca

RELOAD = 90.0  # seconds: a reload is due within ~4 s; this is for a loaded machine


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    ca, other = make_ca(d, "ca"), make_ca(d, "other-ca")
    both = os.path.join(str(d), "both-cas.pem")
    with open(both, "w") as f:
        f.write(open(ca[0]).read() + open(other[0]).read())
    return {"ca": ca[0], "other": other[0], "both": both, "a": issue(d, ca, "a"),
            "b": issue(d, ca, "b"), "expired": issue_expired(d, ca, "old"),
            "stranger": issue_client(d, other, "stranger", "someone")}


def der(path):
    with open(path) as f:
        return ssl.PEM_cert_to_DER_cert(f.read())


def not_after(path):
    out = subprocess.run(["openssl", "x509", "-in", path, "-noout", "-enddate"],
                         capture_output=True, text=True, check=True).stdout
    return ssl.cert_time_to_seconds(out.strip().split("=", 1)[1])


def tls_connect(port, ca):
    ctx = ssl.create_default_context(cafile=ca)
    s = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(s, server_hostname="127.0.0.1")


def served(port, ca):
    """The certificate (DER) a new connection to port is shown."""
    with tls_connect(port, ca) as t:
        return t.getpeercert(binary_form=True)


def serves(port, ca, cert):
    """served() == cert, False while the daemon cannot be reached yet."""
    try:
        return served(port, ca) == der(cert)
    except (OSError, ssl.SSLError):
        return False


def replace(src, dst):
    """A copy of src appears at dst at once, by rename (a new inode)."""
    shutil.copyfile(src, dst + ".tmp")
    os.rename(dst + ".tmp", dst)


def install(pair, live):
    replace(pair[0], live[0])
    replace(pair[1], live[1])


def put(text, dst):
    with open(dst + ".tmp", "w") as f:
        f.write(text)
    os.rename(dst + ".tmp", dst)


class Daemon:
    """A starcloud daemon serving TLS on a free port, its stderr in a file."""

    def __init__(self, tmp, verb, args, ca, cert):
        self.port = free_port()
        self.url = "https://127.0.0.1:%d" % self.port
        self.ca = ca
        self.logpath = os.path.join(str(tmp), "%s-%d.log" % (verb, self.port))
        self.log = open(self.logpath, "w")
        listen = ["--listen", "127.0.0.1:%d" % self.port]
        self.proc = subprocess.Popen([BIN, verb] + listen + list(args), stdout=self.log,
                                     stderr=self.log, stdin=subprocess.DEVNULL)
        wait_for(lambda: self.proc.poll() is not None or serves(self.port, ca, cert),
                 timeout=60, what="%s serving TLS" % verb)
        assert self.proc.poll() is None, self.output()

    def output(self):
        with open(self.logpath) as f:
            return f.read()

    def page(self):
        return requests.get(self.url + "/metrics", verify=self.ca, timeout=10).text

    def metric(self, name, **labels):
        text = self.page()
        want = ",".join('%s="%s"' % kv for kv in sorted(labels.items()))
        for line in text.splitlines():
            m = re.match(r"^(\w+)\{([^}]*)\} (\S+)$", line)
            if m and m.group(1) == name and ",".join(sorted(m.group(2).split(","))) == want:
                return float(m.group(3))
        return None

    def stop(self):
        stop_process(self.proc)
        self.log.close()


@pytest.fixture
def live(tmp_path, pki):
    """The files a daemon is given, holding certificate A to start."""
    d = tmp_path / "live"
    d.mkdir()
    files = (str(d / "tls.crt"), str(d / "tls.key"))
    install(pki["a"], files)
    return files


@pytest.fixture
def daemons():
    started = []
    yield started
    for d in started:
        d.stop()


def server_args(tmp_path, live, *extra):
    return ["--data-dir", str(tmp_path / "data"), "--metrics-public", "--tls-cert", live[0],
            "--tls-key", live[1]] + list(extra)


def test_server_rotates_by_rename_and_keeps_the_old_certificate_on_bad_files(
        tmp_path, pki, live, daemons):
    # The connection kept open across the rotation must not be closed as
    # idle however slowly the machine goes.
    s = Daemon(tmp_path, "server", server_args(tmp_path, live, "--idle-timeout", "1h"),
               pki["ca"], pki["a"][0])
    daemons.append(s)
    assert s.metric("starcloud_tls_certificate_expiry_timestamp_seconds",
                    context="listener") == not_after(pki["a"][0])
    # A connection made before the rotation, kept open across it.
    old = tls_connect(s.port, pki["ca"])
    assert old.getpeercert(binary_form=True) == der(pki["a"][0])
    install(pki["b"], live)
    wait_for(lambda: serves(s.port, pki["ca"], pki["b"][0]), timeout=RELOAD,
             what="certificate B on a new connection")
    assert s.metric("starcloud_tls_reload_total", context="listener", result="ok") >= 1
    assert s.metric("starcloud_tls_certificate_expiry_timestamp_seconds",
                    context="listener") == not_after(pki["b"][0])
    assert "TLS listener: reloaded (a file changed)" in s.output()
    # The established connection goes on, with the certificate it began with.
    old.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert old.recv(4096).startswith(b"HTTP/1.1 200")
    assert old.getpeercert(binary_form=True) == der(pki["a"][0])
    old.close()

    # Bad replacements: each is refused, logged naming the file, counted,
    # and B stays in use.
    bad = [
        (lambda: put("not a certificate\n", live[0]),
         "--tls-cert %s: no PEM certificate in it" % live[0]),
        (lambda: install((pki["a"][0], pki["b"][1]), live),
         "--tls-key %s: does not match --tls-cert %s" % (live[1], live[0])),
        (lambda: install(pki["expired"], live),
         "--tls-cert %s: the certificate has expired" % live[0]),
        (lambda: os.unlink(live[1]), "--tls-key %s: cannot read" % live[1]),
    ]
    for n, (do, message) in enumerate(bad, 1):
        do()
        wait_for(lambda: message in s.output(), timeout=RELOAD, what=message)
        assert s.metric("starcloud_tls_reload_total", context="listener",
                        result="error") >= n
        assert served(s.port, pki["ca"]) == der(pki["b"][0]), message
    assert "still using the certificate loaded before" in s.output()
    assert s.metric("starcloud_tls_certificate_expiry_timestamp_seconds",
                    context="listener") == not_after(pki["b"][0])
    # Good files again: taken.
    install(pki["a"], live)
    wait_for(lambda: serves(s.port, pki["ca"], pki["a"][0]), timeout=RELOAD,
             what="certificate A again")
    assert s.proc.poll() is None


def test_sighup_reloads_when_polling_is_off(tmp_path, pki, live, daemons):
    s = Daemon(tmp_path, "server", server_args(tmp_path, live, "--tls-reload-interval", "0"),
               pki["ca"], pki["a"][0])
    daemons.append(s)
    install(pki["b"], live)
    # Nothing looks at the files: A stays, however long we wait.
    time.sleep(3)
    assert served(s.port, pki["ca"]) == der(pki["a"][0])
    s.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: serves(s.port, pki["ca"], pki["b"][0]), timeout=RELOAD,
             what="certificate B after SIGHUP")
    assert "TLS listener: reloaded (SIGHUP)" in s.output()
    # A SIGHUP over a broken file keeps B, says why, and counts it.
    put("-----BEGIN CERTIFICATE-----\ngarbage\n-----END CERTIFICATE-----\n", live[0])
    s.proc.send_signal(signal.SIGHUP)
    message = "--tls-cert %s: no PEM certificate in it" % live[0]
    wait_for(lambda: message in s.output(), timeout=RELOAD, what=message)
    assert s.metric("starcloud_tls_reload_total", context="listener", result="error") == 1
    assert served(s.port, pki["ca"]) == der(pki["b"][0])
    assert s.proc.poll() is None


def test_sighup_never_stops_a_plain_http_daemon(tmp_path):
    """`systemctl reload` (the units send SIGHUP) must not stop a daemon that
    has no TLS files: SIGHUP's default action would end it, and systemd
    counts that a clean exit, not restarted."""
    port = free_port()
    logpath = str(tmp_path / "server.log")
    log = open(logpath, "w")
    proc = subprocess.Popen([BIN, "server", "--listen", "127.0.0.1:%d" % port, "--data-dir",
                             str(tmp_path / "data")], stdout=log, stderr=log,
                            stdin=subprocess.DEVNULL)
    url = "http://127.0.0.1:%d/healthz" % port

    def healthy():
        try:
            return requests.get(url, timeout=2).ok
        except requests.RequestException:
            return proc.poll() is not None
    try:
        wait_for(healthy, timeout=60, what="the plain server")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "SIGHUP: no TLS files to reload" in open(logpath).read(), timeout=60,
                 what="SIGHUP handled")
        assert proc.poll() is None
        assert requests.get(url, timeout=10).ok
    finally:
        stop_process(proc)
        log.close()


def test_mtls_client_ca_bundle_reloads(tmp_path, pki, live, daemons):
    """--tls-client-ca: a client certificate from a CA added to the bundle
    is accepted once the bundle is replaced."""
    bundle = str(tmp_path / "live" / "client-ca.pem")
    replace(pki["ca"], bundle)
    s = Daemon(tmp_path, "server", server_args(tmp_path, live, "--tls-client-ca", bundle),
               pki["ca"], pki["a"][0])
    daemons.append(s)

    def healthz(cert):
        try:
            return requests.get(s.url + "/healthz", cert=cert, verify=pki["ca"],
                                timeout=10).status_code
        except requests.exceptions.RequestException:
            return None
    assert healthz(None) == 200  # client certificates are asked for, not required
    assert healthz(pki["stranger"]) is None  # signed by a CA the bundle lacks
    replace(pki["both"], bundle)
    wait_for(lambda: healthz(pki["stranger"]) == 200, timeout=RELOAD,
             what="the stranger's CA trusted")
    assert s.metric("starcloud_tls_reload_total", context="listener", result="ok") >= 1


def test_gateway_and_agent_listeners_rotate(tmp_path, pki, live, daemons):
    g = Daemon(tmp_path, "gateway", ["--tls-cert", live[0], "--tls-key", live[1]],
               pki["ca"], pki["a"][0])
    daemons.append(g)
    data = tmp_path / "agent"
    a = Daemon(tmp_path, "agent", ["--server", "http://127.0.0.1:%d" % free_port(), "--token",
                                   "t", "--name", "n1", "--data-dir", str(data), "--gpus",
                                   "1xA100-80GB", "--metrics-public", "--tls-cert", live[0],
                                   "--tls-key", live[1]], pki["ca"], pki["a"][0])
    daemons.append(a)
    install(pki["b"], live)
    for d, what in ((g, "gateway"), (a, "agent")):
        wait_for(lambda: serves(d.port, pki["ca"], pki["b"][0]), timeout=RELOAD,
                 what="the %s serving certificate B" % what)
        assert d.metric("starcloud_tls_reload_total", context="listener", result="ok") >= 1
        assert d.metric("starcloud_tls_certificate_expiry_timestamp_seconds",
                        context="listener") == not_after(pki["b"][0])
        lint(d.page(), what)  # promtool check metrics, with the TLS families
    put("garbage", live[1])
    for d in (g, a):
        message = "--tls-key %s: no PEM private key in it" % live[1]
        wait_for(lambda: message in d.output(), timeout=RELOAD, what=message)
        assert served(d.port, pki["ca"]) == der(pki["b"][0])
        assert d.metric("starcloud_tls_reload_total", context="listener", result="error") >= 1


def test_worker_client_ca_reloads(tmp_path, pki, live, daemons, ckpt):
    """The client side: a decode worker's --ca, replaced by rename, decides
    whether it trusts a prefill worker's certificate on its next pull."""
    p = Daemon(tmp_path, "worker", ["--checkpoint", str(ckpt), "--role", "prefill",
                                    "--tls-cert", live[0], "--tls-key", live[1]],
               pki["ca"], pki["a"][0])
    daemons.append(p)
    trust = str(tmp_path / "live" / "ca.pem")
    replace(pki["other"], trust)
    dport = free_port()
    dlog = open(str(tmp_path / "decode.log"), "w")
    dec = subprocess.Popen([BIN, "worker", "--checkpoint", str(ckpt), "--role", "decode",
                            "--listen", "127.0.0.1:%d" % dport, "--ca", trust],
                           stdout=dlog, stderr=dlog, stdin=subprocess.DEVNULL)
    durl = "http://127.0.0.1:%d" % dport
    try:
        def up():
            try:
                return requests.get(durl + "/v2/health/live", timeout=2).ok
            except requests.RequestException:
                return dec.poll() is not None
        wait_for(up, timeout=60, what="the decode worker")
        assert dec.poll() is None

        def decode():
            pre = requests.post(p.url + "/v1/prefill", json={"prompt": "Once upon a time"},
                                verify=pki["ca"], timeout=30)
            assert pre.status_code == 200, pre.text
            pre = pre.json()
            return requests.post(durl + "/v1/decode", json={
                "kv_url": pre["kv_url"], "first_token": pre["first_token"], "max_tokens": 4},
                timeout=30).status_code
        assert decode() == 502  # the prefill worker's CA is not trusted
        replace(pki["ca"], trust)
        wait_for(lambda: decode() == 200, timeout=RELOAD, step=0.5, what="the new --ca trusted")
        text = requests.get(durl + "/metrics", timeout=10).text
        assert re.search(r'starcloud_tls_reload_total\{context="client",result="ok"\} [1-9]',
                         text), text
    finally:
        stop_process(dec)
        dlog.close()


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def test_dev_cluster_stops_on_hangup(tmp_path):
    """A closed terminal hangs up `starcloud dev`'s whole process group. The
    daemons take SIGHUP as "reload the certificates", so dev must stop
    them itself rather than leave them running without it."""
    env = dict(os.environ, HOME=str(tmp_path / "home"))
    os.makedirs(env["HOME"])
    p = subprocess.Popen([BIN, "dev", "--agents", "1", "--gpus", "1xA100-80GB", "--data-dir",
                          str(tmp_path / "dev")], stdout=subprocess.PIPE, text=True, env=env,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    children = []

    def started():
        with open("/proc/%d/task/%d/children" % (p.pid, p.pid)) as f:
            children[:] = [int(c) for c in f.read().split()]
        return len(children) >= 2  # the server and the agent
    try:
        assert p.stdout.readline().startswith("server:")
        wait_for(started, timeout=60, what="the server and the agent")
        os.killpg(p.pid, signal.SIGHUP)
        p.wait(timeout=60)
        wait_for(lambda: not any(alive(c) for c in children), timeout=60,
                 what="the dev daemons gone")
    finally:
        for c in children:
            if alive(c):
                os.kill(c, signal.SIGKILL)
        stop_process(p)
