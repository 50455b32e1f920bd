"""A stand-in model worker for the serving tests: listens on 127.0.0.1 at
$STARCLOUD_PORT (the port the server gave the pod), answers
/v2/health/ready, /version and /role (the VERSION and ROLE variables of
its template); with TLS_CERT and TLS_KEY, over https."""
import http.server
import os


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path in ("/v2/health/ready", "/v2/health/live"):
            body = b"ok"
        elif self.path == "/version":
            body = os.environ.get("VERSION", "?").encode()
        elif self.path == "/role":
            body = os.environ.get("ROLE", "?").encode()
        else:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["STARCLOUD_PORT"])), Handler)
if os.environ.get("TLS_CERT"):
    import ssl
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(os.environ["TLS_CERT"], os.environ["TLS_KEY"])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
