#!/usr/bin/env python3
"""Hostile clients, as the payments examples meet them: heads and bodies that trickle in are cut
at the request deadline, an oversized head is 431 and a body over the limit 413, and a request
framed two ways (request smuggling) is refused 400 with the connection closed. None of them
reaches the upstream: nginx's access log shows nothing of them."""
import time

from support import case, raw_http

REQUEST_TIMEOUT_MS = 1000
BODY_BYTES = 1 << 20
# How long past the request deadline a cut may take: a bound, not a measurement.
CUT_BOUND_S = 10


class HostileClients(case.ProxyTestCase):
    def setUp(self):
        super().setUp()
        self.nginx = self.start_nginx()
        self.proxy = self.start_proxy(self.nginx.port, limits={
            "request_timeout_ms": REQUEST_TIMEOUT_MS, "body_bytes": BODY_BYTES,
            "head_bytes": 16384})

    def tearDown(self):
        # Whatever came before, the proxy still serves a well-formed request.
        key = self.key("after")
        answer = raw_http.post(self.proxy.port, "/payments", key)
        self.assertEqual(answer.status, 201, answer)
        self.assertEqual(self.nginx.forwarded(key), 1)

    def head(self, marker, extra=""):
        return (f"POST /payments?{marker} HTTP/1.1\r\nHost: e2e.test\r\n"
                f"Idempotency-Key: \"{marker}\"\r\nContent-Type: application/json\r\n{extra}")

    def assert_cut(self, conn, trickle):
        """Sends `trickle` a piece every 100 ms until the proxy closes the connection; it must
        close within the request deadline and the bound, and any answer must be 408."""
        start = time.monotonic()
        for piece in trickle:
            if not conn.try_send(piece) or conn.closed_within(0.1):
                break
            if time.monotonic() - start > REQUEST_TIMEOUT_MS / 1000 + CUT_BOUND_S:
                break
        closed = conn.closed_within(CUT_BOUND_S)
        self.assertTrue(closed, "a trickling request was never cut")
        self.assertLess(time.monotonic() - start, REQUEST_TIMEOUT_MS / 1000 + 2 * CUT_BOUND_S)
        if conn.buffer:
            self.assertTrue(conn.buffer.startswith(b"HTTP/1.1 408"), conn.buffer[:200])

    def test_a_head_that_trickles_in_is_cut_at_the_request_deadline(self):
        marker = self.key("slowhead")
        with raw_http.RawConnection(self.proxy.port) as conn:
            conn.send(f"POST /payments?{marker} HTTP/1.1\r\nHost: e2e.test\r\n".encode())
            self.assert_cut(conn, (f"X-Line-{i}: a\r\n".encode() for i in range(10000)))
        self.assertEqual(self.nginx.forwarded(marker), 0)

    def test_a_body_that_trickles_in_is_cut_and_not_forwarded(self):
        marker = self.key("slowbody")
        with raw_http.RawConnection(self.proxy.port) as conn:
            conn.send((self.head(marker, "Content-Length: 100000\r\n") + "\r\n").encode())
            self.assert_cut(conn, (b"0123456789" for _ in range(10000)))
        self.assertEqual(self.nginx.forwarded(marker), 0)

    def test_an_oversized_head_is_431_and_not_forwarded(self):
        marker = self.key("bighead")
        with raw_http.RawConnection(self.proxy.port) as conn:
            conn.try_send((self.head(marker, f"X-Big: {'a' * 20000}\r\n") +
                           "Content-Length: 2\r\n\r\n{}").encode())
            answer = conn.read_response()
        self.assertEqual(answer.status, 431, answer)
        self.assertEqual(self.nginx.forwarded(marker), 0)

    def test_a_body_over_the_limit_is_413_and_not_forwarded(self):
        marker = self.key("bigbody")
        with raw_http.RawConnection(self.proxy.port) as conn:
            conn.send((self.head(marker, f"Content-Length: {BODY_BYTES + 1}\r\n") +
                       "\r\n").encode())
            conn.try_send(b"x" * 65536)
            answer = conn.read_response()
            self.assertEqual(answer.status, 413, answer)
            self.assertEqual(answer.header("Content-Type"), "application/problem+json", answer)
            self.assertTrue(conn.closed_within(CUT_BOUND_S))
        self.assertEqual(self.nginx.forwarded(marker), 0)

    def test_a_chunked_body_over_the_limit_is_refused_and_not_forwarded(self):
        marker = self.key("bigchunks")
        chunk = b"10000\r\n" + b"y" * 0x10000 + b"\r\n"
        sent = 0
        with raw_http.RawConnection(self.proxy.port) as conn:
            conn.send((self.head(marker, "Transfer-Encoding: chunked\r\n") + "\r\n").encode())
            while sent < 64 * BODY_BYTES and conn.try_send(chunk):
                sent += len(chunk)
                if conn.closed_within(0.001):
                    break
            self.assertTrue(conn.closed_within(CUT_BOUND_S), "an endless chunked body is read on")
            data = conn.buffer
        self.assertLess(sent, 8 * BODY_BYTES, "the proxy read far past body_bytes")
        if data:
            self.assertTrue(data.startswith(b"HTTP/1.1 413"), data[:200])
        self.assertEqual(self.nginx.forwarded(marker), 0)

    def refused_400_and_closed(self, request, marker):
        with raw_http.RawConnection(self.proxy.port) as conn:
            conn.send(request)
            answer = conn.read_response()
            self.assertEqual(answer.status, 400, answer)
            self.assertTrue(conn.closed_within(CUT_BOUND_S),
                            "the connection stays open after a request framed two ways")
        self.assertEqual(self.nginx.forwarded(marker), 0, self.nginx.lines(marker))

    def test_content_length_with_transfer_encoding_is_400_and_never_forwarded(self):
        marker = self.key("clte")
        smuggled = (f"POST /payments?{marker}-smuggled HTTP/1.1\r\nHost: e2e.test\r\n"
                    f"Idempotency-Key: \"{marker}-smuggled\"\r\nContent-Length: 2\r\n\r\n{{}}")
        request = (self.head(marker, "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n") +
                   "\r\n0\r\n\r\n" + smuggled)
        self.refused_400_and_closed(request.encode(), marker)

    def test_two_content_lengths_are_400_and_never_forwarded(self):
        marker = self.key("clcl")
        request = (self.head(marker, "Content-Length: 2\r\nContent-Length: 60\r\n") + "\r\n{}" +
                   f"GET /payments?{marker}-smuggled HTTP/1.1\r\nHost: e2e.test\r\n\r\n")
        self.refused_400_and_closed(request.encode(), marker)

    def test_an_obs_folded_field_is_400_and_never_forwarded(self):
        marker = self.key("fold")
        request = self.head(marker, "X-Folded: a\r\n b\r\nContent-Length: 2\r\n") + "\r\n{}"
        self.refused_400_and_closed(request.encode(), marker)


if __name__ == "__main__":
    case.main()
