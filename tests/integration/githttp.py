"""A git server over plain HTTP on loopback with basic authentication: the
real `git http-backend` (in Debian's git package) run as a CGI program
behind Python's http.server, so no web server package is needed. Counts the
requests it refuses, so that a test can see a client that keeps retrying
wrong credentials."""

import base64
import http.server
import os
import subprocess
import threading


class GitHttpServer:
    """Serves the repositories under `root` at http://127.0.0.1:PORT/NAME,
    to `user` with `password` only (401 otherwise)."""

    def __init__(self, root, user, password):
        self.root = root
        self.expected = "Basic " + base64.b64encode(
            ("%s:%s" % (user, password)).encode()).decode()
        self.user = user
        self.refused = 0
        self.served = 0
        self.lock = threading.Lock()
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                server.handle(self)

            def do_POST(self):
                server.handle(self)

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def url(self, name):
        return "http://127.0.0.1:%d/%s" % (self.port, name)

    def start(self):
        self.thread.start()
        return self

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def refused_count(self):
        with self.lock:
            return self.refused

    def handle(self, req):
        body = self.read_body(req)
        if req.headers.get("Authorization") != self.expected:
            with self.lock:
                self.refused += 1
            req.send_response(401)
            req.send_header("WWW-Authenticate", 'Basic realm="git"')
            req.send_header("Content-Length", "0")
            req.end_headers()
            return
        path, _, query = req.path.partition("?")
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "GIT_PROJECT_ROOT": self.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": req.command,
            "CONTENT_TYPE": req.headers.get("Content-Type", ""),
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": req.headers.get("Content-Encoding", ""),
            "GIT_PROTOCOL": req.headers.get("Git-Protocol", ""),
            "REMOTE_USER": self.user,
            "REMOTE_ADDR": "127.0.0.1",
        }
        p = subprocess.run(["git", "http-backend"], input=body, env=env,
                           capture_output=True, timeout=60)
        head, _, payload = p.stdout.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = p.stdout.partition(b"\n\n")
        status = 200
        headers = []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = int(value.strip().split()[0])
            elif name:
                headers.append((name, value.strip()))
        with self.lock:
            self.served += 1
        req.send_response(status)
        for name, value in headers:
            req.send_header(name, value)
        req.send_header("Content-Length", str(len(payload)))
        req.end_headers()
        req.wfile.write(payload)

    @staticmethod
    def read_body(req):
        if req.command != "POST":
            return b""
        if req.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = b""
            while True:
                size = int(req.rfile.readline().strip().split(b";")[0], 16)
                if size == 0:
                    req.rfile.readline()
                    return out
                out += req.rfile.read(size)
                req.rfile.readline()
        return req.rfile.read(int(req.headers.get("Content-Length", "0") or 0))
