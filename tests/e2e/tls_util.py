"""Certificates for TLS tests, made with the openssl command (independent of
Starcloud's own dev CA, src/cli/devca.c), and an HTTPS OTLP collector that
records the spans it receives and the handshakes clients refused."""
import http.server
import json
import os
import socketserver
import ssl
import subprocess
import threading


def _run(*args):
    subprocess.run(["openssl"] + list(args), check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)


def make_ca(folder, name="ca"):
    """folder/NAME.pem and NAME-key.pem: a self-signed P-256 CA."""
    os.makedirs(str(folder), exist_ok=True)
    key, cert = os.path.join(str(folder), name + "-key.pem"), os.path.join(str(folder), name + ".pem")
    _run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
         "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=test " + name,
         "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    return cert, key


def _issue(folder, ca, name, cn, ext, days):
    """folder/NAME.pem and NAME-key.pem (mode 0600), for CN cn with the
    extensions ext (None: none), signed by ca, valid for days (-1: expired a
    day ago). Returns (cert, key)."""
    f = str(folder)
    key, csr, cert = (os.path.join(f, name + s) for s in ("-key.pem", ".csr", ".pem"))
    extra = []
    if ext is not None:
        extra = ["-extfile", os.path.join(f, name + ".ext")]
        with open(extra[1], "w") as e:
            e.write(ext)
    _run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
         "-out", csr, "-subj", "/CN=" + cn)
    _run("x509", "-req", "-in", csr, "-CA", ca[0], "-CAkey", ca[1], "-CAcreateserial",
         "-out", cert, "-days", str(days), *extra)
    os.chmod(key, 0o600)
    return cert, key


def issue(folder, ca, name, ip="127.0.0.1"):
    """A server certificate for ip signed by ca. Returns (cert, key)."""
    return _issue(folder, ca, name, ip,
                  "subjectAltName=IP:%s\nextendedKeyUsage=serverAuth\n" % ip, 2)


def issue_expired(folder, ca, name):
    """A certificate for 127.0.0.1 (no extensions) whose notAfter is a day
    ago. Returns (cert, key)."""
    return _issue(folder, ca, name, "127.0.0.1", None, -1)


def issue_client(folder, ca, name, cn, days=2):
    """A client certificate (clientAuth) for cn signed by ca. Returns
    (cert, key)."""
    return _issue(folder, ca, name, cn, "extendedKeyUsage=clientAuth\n", days)


class Collector:
    """An OTLP/HTTP JSON receiver on https://127.0.0.1:PORT. spans: every
    span received; refused: handshakes that failed (a client that does not
    trust the certificate aborts the handshake)."""

    def __init__(self, cert):
        self.spans, self.refused = [], []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                doc = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                for rs in doc.get("resourceSpans", []):
                    for ss in rs.get("scopeSpans", []):
                        owner.spans.extend(ss.get("spans", []))
                self.send_response(200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"{}")

            def log_message(self, *args):
                pass

        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(*cert)

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

            def get_request(self):
                sock, addr = self.socket.accept()
                return ctx.wrap_socket(sock, server_side=True,
                                       do_handshake_on_connect=False), addr

            def finish_request(self, request, client_address):
                try:
                    request.do_handshake()
                except (ssl.SSLError, OSError) as e:
                    owner.refused.append(str(e))
                    return
                super().finish_request(request, client_address)

        self.srv = Server(("127.0.0.1", 0), Handler)
        self.url = "https://127.0.0.1:%d" % self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def close(self):
        self.srv.shutdown()
        self.srv.server_close()
