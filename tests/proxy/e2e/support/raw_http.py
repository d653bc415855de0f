"""HTTP/1.1 over a plain socket, every byte kept: the tests compare answers byte for byte and send
requests no well-behaved client library would (smuggling, slow heads, oversized fields)."""
import socket
import time

# Every read on a socket gives up after this long: no test waits without a bound.
READ_TIMEOUT_S = 30.0


class ConnectionClosed(Exception):
    """The peer closed the connection before a whole answer arrived."""


class Response:
    """One answer as it came off the socket: `raw` holds every byte of it."""

    def __init__(self, raw, status, reason, headers, body):
        self.raw = raw
        self.status = status
        self.reason = reason
        self.headers = headers  # [(name, value)] in the order received
        self.body = body

    def header(self, name):
        """The value of the one field `name` (case-insensitive), or None; two fails the test."""
        values = self.all(name)
        if len(values) > 1:
            raise AssertionError(f"{name} appears {len(values)} times: {values}")
        return values[0] if values else None

    def all(self, name):
        return [v for n, v in self.headers if n.lower() == name.lower()]

    @property
    def replayed(self):
        return self.header("Idempotent-Replayed") == "true"

    def __repr__(self):
        return f"<{self.status} {self.headers} {self.body[:200]!r}>"


class RawConnection:
    """A client connection to 127.0.0.1:port."""

    def __init__(self, port, timeout=READ_TIMEOUT_S, tls=None):
        """`tls`: an ssl.SSLContext to speak TLS with (the handshake happens here)."""
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.settimeout(timeout)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname="127.0.0.1")
        self.buffer = b""

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def try_send(self, data):
        """False when the peer has closed or reset the connection."""
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False

    def _fill(self):
        chunk = self.sock.recv(65536)
        if not chunk:
            raise ConnectionClosed(self.buffer[:300])
        self.buffer += chunk

    def _take_until(self, marker):
        while marker not in self.buffer:
            self._fill()
        end = self.buffer.index(marker) + len(marker)
        taken, self.buffer = self.buffer[:end], self.buffer[end:]
        return taken

    def _take(self, n):
        while len(self.buffer) < n:
            self._fill()
        taken, self.buffer = self.buffer[:n], self.buffer[n:]
        return taken

    def read_response(self, head_request=False):
        """The next whole answer (framed by Content-Length, chunked, or the close)."""
        head = self._take_until(b"\r\n\r\n")
        lines = head[:-4].split(b"\r\n")
        version, _, rest = lines[0].partition(b" ")
        if not version.startswith(b"HTTP/1."):
            raise AssertionError(f"not an HTTP/1.x status line: {lines[0]!r}")
        code, _, reason = rest.partition(b" ")
        status = int(code)
        headers = []
        for line in lines[1:]:
            name, sep, value = line.partition(b":")
            if not sep:
                raise AssertionError(f"a header line without a colon: {line!r}")
            headers.append((name.decode("latin-1"), value.strip(b" \t").decode("latin-1")))
        raw = head
        body = b""
        fields = {n.lower(): v for n, v in headers}
        if head_request or status in (204, 304) or 100 <= status < 200:
            pass
        elif "chunked" in fields.get("transfer-encoding", "").lower():
            while True:
                size_line = self._take_until(b"\r\n")
                raw += size_line
                size = int(size_line.split(b";")[0].strip(), 16)
                if size == 0:
                    trailer = self._take_until(b"\r\n")
                    raw += trailer
                    while trailer != b"\r\n":
                        trailer = self._take_until(b"\r\n")
                        raw += trailer
                    break
                data = self._take(size + 2)
                raw += data
                body += data[:-2]
        elif "content-length" in fields:
            body = self._take(int(fields["content-length"]))
            raw += body
        else:
            try:
                while True:
                    self._fill()
            except ConnectionClosed:
                pass
            body, self.buffer = self.buffer, b""
            raw += body
        return Response(raw, status, reason.decode("latin-1"), headers, body)

    def closed_within(self, seconds):
        """True when the peer closes (or resets) the connection within `seconds`; what it sends
        before is read and dropped."""
        deadline = time.monotonic() + seconds
        try:
            while time.monotonic() < deadline:
                self.sock.settimeout(max(0.01, deadline - time.monotonic()))
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buffer += chunk
        except socket.timeout:
            return False
        except OSError:
            return True  # reset
        return False

    def read_until_closed(self, seconds):
        """Every byte received until the peer closes, within `seconds` (else AssertionError)."""
        if not self.closed_within(seconds):
            raise AssertionError(f"the connection stayed open {seconds} s: {self.buffer[:300]!r}")
        data, self.buffer = self.buffer, b""
        return data


def request_bytes(method, path, headers=(), body=b"", host="e2e.test"):
    """A well-formed request: Host first, then `headers`, then Content-Length for a body."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {host}"]
    lines += [f"{name}: {value}" for name, value in headers]
    if body or method in ("POST", "PUT", "PATCH"):
        lines.append(f"Content-Length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def exchange(port, method, path, headers=(), body=b""):
    """One request on a new connection, its answer; the connection is closed after."""
    with RawConnection(port) as conn:
        conn.send(request_bytes(method, path, headers, body))
        return conn.read_response(head_request=(method == "HEAD"))


PAYMENT = b'{"amount":1250,"currency":"EUR"}'


def post_request(path, key, body=PAYMENT, extra=()):
    """The bytes of a JSON POST with `key` as its Idempotency-Key (a quoted sf-string; None:
    no key). Every test sends a key's requests this way, so that only what a test changes on
    purpose changes the payload's fingerprint."""
    headers = [("Content-Type", "application/json")]
    if key is not None:
        headers.append(("Idempotency-Key", f'"{key}"'))
    headers += list(extra)
    return request_bytes("POST", path, headers, body)


def post(port, path, key, body=PAYMENT, extra=(), tls=None):
    """post_request on a new connection (over TLS with `tls`, an ssl.SSLContext), its answer;
    the connection is closed after."""
    with RawConnection(port, tls=tls) as conn:
        conn.send(post_request(path, key, body, extra))
        return conn.read_response()


def without_field(raw, name):
    """`raw` (an answer's bytes) with every `name:` line of its head taken out, and how many."""
    head, sep, body = raw.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    prefix = name.lower().encode("latin-1") + b":"
    kept = [line for line in lines if not line.lower().startswith(prefix)]
    return b"\r\n".join(kept) + sep + body, len(lines) - len(kept)
