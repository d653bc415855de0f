#!/usr/bin/env python3
"""Two idem-proxy instances on one Redis (IDEM_TEST_REDIS_URI), as behind a load balancer:
concurrent identical requests split between them reach the upstream once."""
import os
import sys
import time
import urllib.parse
import uuid

from support import case, raw_http, upstreams

CLIENTS = 50
SKIP = 77  # ctest's SKIP_RETURN_CODE for this test: scripts/test fails on a skip


class TwoInstancesOneRedis(case.ProxyTestCase):
    def start_pair(self, upstream_port):
        overrides = {"store": {"scope": f"e2e-{uuid.uuid4().hex}"},
                     "duplicates": {"wait_ms": 20000}}
        uri = os.environ["IDEM_TEST_REDIS_URI"]
        return [self.start_proxy(upstream_port, uri, **overrides) for _ in range(2)]

    def test_fifty_requests_split_between_two_instances_reach_nginx_once(self):
        nginx = self.start_nginx()
        a, b = self.start_pair(nginx.port)
        key = self.key()
        ports = [(a if i % 2 else b).port for i in range(CLIENTS)]
        answers = self.concurrently(
            [lambda p=p: raw_http.post(p, "/payments", key) for p in ports])
        self.assertEqual(nginx.forwarded(key), 1, nginx.lines(key))
        self.assertEqual([x.status for x in answers], [201] * CLIENTS, answers)
        self.assertEqual({x.body for x in answers}, {b'{"ok":true}'})
        self.assertEqual(sum(x.replayed for x in answers), CLIENTS - 1)

    def test_the_instance_that_did_not_forward_waits_for_the_other_and_replays(self):
        upstream = self.start_py()
        a, b = self.start_pair(upstream.port)
        key = self.key()
        with raw_http.RawConnection(a.port) as first:
            first.send(raw_http.post_request("/py/pay?gate=1", key, b"{}"))
            upstream.wait_count(key, 1)
            others = [raw_http.RawConnection(p.port) for p in (a, b) * 5]
            try:
                for conn in others:
                    conn.send(raw_http.post_request("/py/pay?gate=1", key, b"{}"))
                upstream.open_gate()
                answer = first.read_response()
                replies = [conn.read_response() for conn in others]
            finally:
                for conn in others:
                    conn.close()
        self.assertEqual((answer.status, answer.replayed), (201, False), answer)
        for reply in replies:
            self.assertEqual((reply.status, reply.replayed, reply.body), (201, True, answer.body))
        self.assertEqual(upstream.count(key), 1)


class HealthFollowsTheStore(case.ProxyTestCase):
    def test_health_is_503_while_redis_cannot_be_reached_and_ok_again_after(self):
        nginx = self.start_nginx()
        redis = urllib.parse.urlsplit(os.environ["IDEM_TEST_REDIS_URI"])
        relay = upstreams.Relay(redis.port)
        self.addCleanup(relay.stop)
        # The server's URI with the relay in its place: its scheme (rediss:// over TLS), user and
        # query (the CA and client certificate) are kept.
        through_relay = redis._replace(
            netloc=redis.netloc.rsplit("@", 1)[0] + "@" if "@" in redis.netloc else "")
        through_relay = through_relay._replace(
            netloc=through_relay.netloc + f"127.0.0.1:{relay.port}")
        proxy = self.start_proxy(nginx.port, urllib.parse.urlunsplit(through_relay),
                                 store={"scope": f"e2e-{uuid.uuid4().hex}"})
        self.assertEqual(raw_http.exchange(proxy.admin_port, "GET", "/health").status, 200)
        relay.cut()
        self.assertEqual(self.health_within(proxy, 503), 503)
        key = self.key()
        answer = raw_http.post(proxy.port, "/payments", key)
        self.assertEqual(answer.status, 503, answer)
        self.assertEqual(nginx.forwarded(key), 0)
        relay.restore()
        self.assertEqual(self.health_within(proxy, 200), 200)
        self.assertEqual(raw_http.post(proxy.port, "/payments", key).status, 201)
        self.assertEqual(nginx.forwarded(key), 1)

    @staticmethod
    def health_within(proxy, status, bound_s=30):
        """GET /health until it answers `status` (the store's client notices a cut connection
        on its next use or its reconnect), within a bound; the last status seen."""
        deadline = time.monotonic() + bound_s
        while True:
            seen = raw_http.exchange(proxy.admin_port, "GET", "/health").status
            if seen == status or time.monotonic() > deadline:
                return seen
            time.sleep(0.2)


if __name__ == "__main__":
    if not os.environ.get("IDEM_TEST_REDIS_URI"):
        print("IDEM_TEST_REDIS_URI is not set (scripts/test sets it): skipped")
        sys.exit(SKIP)
    case.main()
