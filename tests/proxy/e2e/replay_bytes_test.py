#!/usr/bin/env python3
"""A replay is the first answer byte for byte but for Date (and Idempotent-Replayed: true), read
raw off the socket; hop-by-hop fields of the upstream's answer reach no client."""
from support import case, raw_http

HOP_BY_HOP = ("Connection", "Keep-Alive", "X-Hop-Secret", "Proxy-Authenticate",
              "Transfer-Encoding", "Upgrade", "TE", "Trailer")


class ReplayBytes(case.ProxyTestCase):
    def replays_match(self, port, path, key, body):
        first = raw_http.post(port, path, key, body)
        replays = [raw_http.post(port, path, key, body) for _ in range(3)]
        for replay in replays:
            self.assert_same_answer_but_date(first, replay)
        # On one keep-alive connection too.
        with raw_http.RawConnection(port) as conn:
            for _ in range(2):
                conn.send(raw_http.post_request(path, key, body))
                self.assert_same_answer_but_date(first, conn.read_response())
        return first

    def test_nginx_answer_replays_byte_for_byte(self):
        nginx = self.start_nginx()
        proxy = self.start_proxy(nginx.port)
        key = self.key()
        first = self.replays_match(proxy.port, "/payments", key, b'{"amount":1}')
        self.assertEqual((first.status, first.body), (201, b'{"ok":true}'))
        self.assertEqual(first.header("Content-Length"), "11")
        self.assertEqual(nginx.forwarded(key), 1)

    def test_recorded_fields_are_the_end_to_end_ones(self):
        upstream = self.start_py()
        proxy = self.start_proxy(upstream.port)
        key = self.key()
        first = self.replays_match(proxy.port, "/py/pay", key, b'{"amount":2}')
        self.assertEqual(upstream.count(key), 1)
        self.assertEqual(first.status, 201)
        self.assertEqual(first.header("X-Serial"), "1")
        self.assertEqual(first.all("Set-Cookie"), ["a=1; Path=/", "b=2; Path=/"])
        self.assertEqual(first.header("Location"), "/payments/1")
        self.assertEqual(first.header("Content-Type"), "application/json")
        self.assertEqual(first.header("Content-Length"), str(len(first.body)))
        self.assertIn(b'"serial": 1', first.body)
        for name in HOP_BY_HOP:
            if name == "Connection":
                # The proxy's own Connection field may speak of the client's connection, never
                # of the upstream's.
                self.assertNotIn("x-hop-secret", (first.header(name) or "").lower())
            else:
                self.assertIsNone(first.header(name), f"{name} reached the client: {first}")

    def test_an_upstream_5xx_recorded_by_policy_replays_byte_for_byte(self):
        upstream = self.start_py()
        proxy = self.start_proxy(upstream.port, failures={"on_5xx": "record"})
        key = self.key()
        first = self.replays_match(proxy.port, "/py/pay?status=503", key, b"{}")
        self.assertEqual(first.status, 503)
        self.assertEqual(upstream.count(key), 1)


if __name__ == "__main__":
    case.main()
