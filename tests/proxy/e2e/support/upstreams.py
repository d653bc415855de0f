"""The services the proxy stands in front of in these tests, none of them the proxy's code:
nginx from Debian, whose access log is the independent count of what reached it, and a Python
http.server that can hold a request, fail, answer large bodies and count what it got."""
import http.server
import json
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.parse

from . import raw_http

START_BOUND_S = 15.0


def free_port():
    """A port nothing listens on now (the caller binds it next; a lost race is retried)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_listening(port, process, bound_s=START_BOUND_S):
    """Returns once 127.0.0.1:port accepts; raises when `process` exits or the bound passes."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        if process is not None and process.poll() is not None:
            return False
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"nothing listens on port {port} after {bound_s} s")


def stop_process(process):
    """SIGTERM, then SIGKILL if `process` (a Popen, or None) has not exited within 10 s."""
    if process and process.poll() is None:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def nginx_binary():
    found = os.environ.get("IDEM_NGINX") or shutil.which("nginx") or "/usr/sbin/nginx"
    if not os.access(found, os.X_OK):
        raise AssertionError("nginx not found (Debian: nginx-light; scripts/deps test installs it)")
    return found


NGINX_CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  log_format e2e '$request_method $request_uri key=$http_idempotency_key status=$status';
  access_log {prefix}/access.log e2e;
  client_body_temp_path {prefix}/body;
  proxy_temp_path {prefix}/proxy;
  fastcgi_temp_path {prefix}/fastcgi;
  uwsgi_temp_path {prefix}/uwsgi;
  scgi_temp_path {prefix}/scgi;
  keepalive_requests 1000000;
  keepalive_timeout 60s;
  server {{
    listen 127.0.0.1:{port};
    default_type application/json;
    location = /payments {{ return 201 '{{"ok":true}}'; }}
    location /orders/ {{ return 201 '{{"order":"placed"}}'; }}
    location /fence/ {{ return 200 'fence'; }}
    location / {{ return 404 'no such thing'; }}
  }}
}}
"""


class Nginx:
    """nginx in the foreground on a free port, in a prefix of its own; `forwarded(text)` counts
    the access log's lines that hold `text` (a key, a path)."""

    def __init__(self):
        self.prefix = tempfile.mkdtemp(prefix="idem-e2e-nginx.")
        self.process = None
        for _ in range(5):
            self.port = free_port()
            conf = os.path.join(self.prefix, "nginx.conf")
            with open(conf, "w", encoding="ascii") as f:
                f.write(NGINX_CONF.format(prefix=self.prefix, port=self.port))
            with open(os.path.join(self.prefix, "stderr"), "wb") as stderr:
                self.process = subprocess.Popen(
                    [nginx_binary(), "-p", self.prefix, "-c", conf, "-e",
                     os.path.join(self.prefix, "error.log")],
                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
            if wait_listening(self.port, self.process):
                return
            self.process.wait(5)  # lost the port to another process: try another
        raise AssertionError(f"nginx did not start: {self.errors()}")

    def errors(self):
        texts = []
        for name in ("stderr", "error.log"):
            try:
                with open(os.path.join(self.prefix, name), encoding="utf-8", errors="replace") as f:
                    texts.append(f.read())
            except OSError:
                pass
        return "\n".join(texts)

    def fence(self):
        """Answers once nginx has logged every request it finished before: one worker handles
        its connections in turn, so a request answered after them is logged after them."""
        marker = f"/fence/{time.monotonic_ns()}"
        answer = raw_http.exchange(self.port, "GET", marker)
        assert answer.status == 200, answer
        deadline = time.monotonic() + START_BOUND_S
        while marker not in self.log():
            assert time.monotonic() < deadline, "nginx did not log the fence request"
            time.sleep(0.01)

    def log(self):
        with open(os.path.join(self.prefix, "access.log"), encoding="latin-1") as f:
            return f.read()

    def lines(self, text):
        self.fence()
        return [line for line in self.log().splitlines() if text in line]

    def forwarded(self, text):
        return len(self.lines(text))

    def stop(self):
        stop_process(self.process)
        shutil.rmtree(self.prefix, ignore_errors=True)


class _Handler(http.server.BaseHTTPRequestHandler):
    """What the Python upstream answers, chosen by the query string:
    status=N (default 201), bytes=N (a body of N bytes instead of the JSON), gate=1 (hold the
    request until the test opens the gate). Every answer carries hop-by-hop fields the proxy must
    drop and end-to-end ones it must keep."""

    protocol_version = "HTTP/1.1"
    server_version = "e2e-upstream"

    def log_message(self, *args):
        pass

    def _body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            body = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return body
                body += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _serve(self):
        body = self._body()
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
        upstream = self.server.upstream
        serial = upstream.note(self, body)
        if query.get("gate") == ["1"]:
            upstream.gate.wait(upstream.gate_bound_s)
        status = int(query.get("status", ["201"])[0])
        if "bytes" in query:
            n = int(query["bytes"][0])
            answer = (b"0123456789abcdef" * (n // 16 + 1))[:n]
            content_type = "application/octet-stream"
        else:
            answer = json.dumps({"serial": serial, "path": self.path,
                                 "body": body.decode("utf-8", "replace")}).encode()
            content_type = "application/json"
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(answer)))
        self.send_header("X-Serial", str(serial))
        self.send_header("Set-Cookie", "a=1; Path=/")
        self.send_header("Set-Cookie", "b=2; Path=/")
        self.send_header("Location", f"/payments/{serial}")
        # Hop-by-hop: the proxy must not pass these on (nor record them).
        self.send_header("Connection", "X-Hop-Secret")
        self.send_header("X-Hop-Secret", "not for the client")
        self.send_header("Keep-Alive", "timeout=30")
        self.send_header("Proxy-Authenticate", "Basic realm=upstream")
        self.end_headers()
        try:
            self.wfile.write(answer)
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the proxy went away (killed): nothing to tell it

    do_POST = _serve
    do_PUT = _serve
    do_GET = _serve


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        pass  # a proxy killed mid-answer resets its connections: not a failure of the upstream


class PyUpstream:
    """The Python upstream, in this process, on a free port."""

    def __init__(self, gate_bound_s=60.0):
        self.lock = threading.Condition()
        self.requests = []  # (method, path, headers, body) as received
        self.gate = threading.Event()
        self.gate_bound_s = gate_bound_s
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.upstream = self
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def note(self, handler, body):
        with self.lock:
            self.requests.append((handler.command, handler.path, dict(handler.headers.items()),
                                  body))
            self.lock.notify_all()
            return len(self.requests)

    def count(self, key):
        """Requests received with this Idempotency-Key (its value holds `key`)."""
        with self.lock:
            return sum(1 for _, _, h, _ in self.requests if key in h.get("Idempotency-Key", ""))

    def count_path(self, text):
        with self.lock:
            return sum(1 for _, path, _, _ in self.requests if text in path)

    def wait_count(self, key, n, bound_s=START_BOUND_S):
        """Waits (bounded) until `n` requests with `key` have arrived."""
        deadline = time.monotonic() + bound_s
        with self.lock:
            while self.count_unlocked(key) < n:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"{self.count_unlocked(key)} requests with {key} "
                                         f"reached the upstream in {bound_s} s, not {n}")
                self.lock.wait(left)

    def count_unlocked(self, key):
        return sum(1 for _, _, h, _ in self.requests if key in h.get("Idempotency-Key", ""))

    def open_gate(self):
        self.gate.set()

    def stop(self):
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


class Relay:
    """A TCP relay from a free port to 127.0.0.1:target: `cut()` closes it and every connection
    through it, as a network partition would, until `restore()`."""

    def __init__(self, target_port):
        self.target_port = target_port
        self.lock = threading.Lock()
        self.sockets = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self.lock:
                if not self.open:
                    client.close()
                    continue
                try:
                    server = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                except OSError:
                    client.close()
                    continue
                self.sockets += [client, server]
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source, sink):
        try:
            while True:
                data = source.recv(65536)
                if not data:
                    break
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        with self.lock:
            self.open = False
            for s in self.sockets:
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                s.close()
            self.sockets = []

    def restore(self):
        with self.lock:
            self.open = True

    def stop(self):
        self.cut()
        self.listener.close()
