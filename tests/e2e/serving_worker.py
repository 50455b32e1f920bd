"""A stand-in model worker for the serving tests: listens on 127.0.0.1 at
$STARCLOUD_PORT (the port the server gave the pod), answers
/v2/health/ready, /version and /role (the VERSION and ROLE variables of
its template)."""
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


http.server.ThreadingHTTPServer(("127.0.0.1", int(os.environ["STARCLOUD_PORT"])),
                                Handler).serve_forever()
