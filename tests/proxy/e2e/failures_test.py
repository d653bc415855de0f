#!/usr/bin/env python3
"""Upstream failures per [failures]: released by default (a retry is forwarded again), recorded
when configured; timeouts 504 and connection failures 502 as problem+json; an answer larger than
record_bytes streamed whole and never recorded (a repeat is told unrecorded_status)."""
import json

from support import case, raw_http, upstreams


class Failures(case.ProxyTestCase):
    def test_an_upstream_5xx_releases_the_key_by_default(self):
        upstream = self.start_py()
        proxy = self.start_proxy(upstream.port)
        key = self.key()
        for n in (1, 2):
            answer = raw_http.post(proxy.port, "/py/pay?status=503", key, b"{}")
            self.assertEqual((answer.status, answer.replayed), (503, False), answer)
            self.assertEqual(json.loads(answer.body)["serial"], n, "the upstream's own body")
            self.assertEqual(upstream.count(key), n)
        # Released, the key takes the next payload as a first one.
        answer = raw_http.post(proxy.port, "/py/pay", key, b'{"other":1}')
        self.assertEqual((answer.status, answer.replayed), (201, False), answer)
        self.assertEqual(upstream.count(key), 3)

    def test_an_upstream_5xx_recorded_by_policy_is_replayed(self):
        upstream = self.start_py()
        proxy = self.start_proxy(upstream.port, failures={"on_5xx": "record"})
        key = self.key()
        first = raw_http.post(proxy.port, "/py/pay?status=500", key, b"{}")
        again = raw_http.post(proxy.port, "/py/pay?status=500", key, b"{}")
        self.assertEqual((first.status, again.status), (500, 500))
        self.assertEqual((again.replayed, again.body), (True, first.body))
        self.assertEqual(upstream.count(key), 1)

    def test_an_upstream_that_does_not_answer_in_time_is_504_and_released(self):
        upstream = self.start_py()
        proxy = self.start_proxy(upstream.port, upstream={"response_timeout_ms": 500})
        key = self.key()
        answer = raw_http.post(proxy.port, "/py/pay?gate=1", key, b"{}")
        self.assertEqual(answer.status, 504, answer)
        self.assertEqual(answer.header("Content-Type"), "application/problem+json", answer)
        self.assertEqual(json.loads(answer.body)["status"], 504)
        upstream.open_gate()
        retry = raw_http.post(proxy.port, "/py/pay?gate=1", key, b"{}")
        self.assertEqual((retry.status, retry.replayed), (201, False), retry)
        self.assertEqual(upstream.count(key), 2)

    def test_a_timeout_recorded_by_policy_is_replayed_without_another_forward(self):
        upstream = self.start_py()
        proxy = self.start_proxy(upstream.port, upstream={"response_timeout_ms": 500},
                                 failures={"on_timeout": "record"})
        key = self.key()
        first = raw_http.post(proxy.port, "/py/pay?gate=1", key, b"{}")
        self.assertEqual(first.status, 504, first)
        upstream.open_gate()
        again = raw_http.post(proxy.port, "/py/pay?gate=1", key, b"{}")
        self.assertEqual((again.status, again.replayed, again.body), (504, True, first.body))
        self.assertEqual(upstream.count(key), 1)

    def test_an_upstream_that_refuses_connections_is_502_and_released(self):
        proxy = self.start_proxy(upstreams.free_port())  # nothing listens there
        key = self.key()
        for _ in range(2):
            answer = raw_http.post(proxy.port, "/payments", key, b"{}")
            self.assertEqual((answer.status, answer.replayed), (502, False), answer)
            self.assertEqual(answer.header("Content-Type"), "application/problem+json", answer)
            self.assertEqual(json.loads(answer.body)["status"], 502)

    def test_an_answer_over_record_bytes_is_streamed_whole_and_never_recorded(self):
        upstream = self.start_py()
        proxy = self.start_proxy(upstream.port, limits={"record_bytes": 65536},
                                 failures={"unrecorded_status": 410})
        key = self.key()
        size = 3 * 1024 * 1024
        first = raw_http.post(proxy.port, f"/py/pay?bytes={size}", key, b"{}")
        self.assertEqual(first.status, 201, first)
        self.assertEqual(len(first.body), size)
        self.assertEqual(first.body, (b"0123456789abcdef" * (size // 16 + 1))[:size])
        again = raw_http.post(proxy.port, f"/py/pay?bytes={size}", key, b"{}")
        self.assertEqual(again.status, 410, again)
        self.assertEqual(again.header("Content-Type"), "application/problem+json", again)
        self.assertEqual(upstream.count(key), 1)
        # An answer within record_bytes on the same route is recorded as usual.
        small = self.key()
        answers = [raw_http.post(proxy.port, "/py/pay?bytes=16384", small, b"{}")
                   for _ in range(2)]
        self.assertEqual([a.replayed for a in answers], [False, True])
        self.assertEqual(answers[1].body, answers[0].body)
        self.assertEqual(upstream.count(small), 1)


if __name__ == "__main__":
    case.main()
