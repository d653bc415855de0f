#!/usr/bin/env python3
"""Fifty concurrent identical POSTs with one key reach the upstream once: every client gets the
one answer (the others marked Idempotent-Replayed), or 409 in_progress while it is in flight when
duplicates do not wait."""
from support import case, raw_http

CLIENTS = 50


class ForwardOnce(case.ProxyTestCase):
    def fifty(self, port, path, key):
        return self.concurrently([lambda: raw_http.post(port, path, key)] * CLIENTS)

    def test_waiting_duplicates_all_get_the_one_answer_nginx_logs_once(self):
        nginx = self.start_nginx()
        proxy = self.start_proxy(nginx.port, duplicates={"wait_ms": 20000})
        key = self.key()
        answers = self.fifty(proxy.port, "/payments", key)
        self.assertEqual(nginx.forwarded(key), 1, nginx.lines(key))
        self.assertEqual([a.status for a in answers], [201] * CLIENTS, answers)
        self.assertEqual({a.body for a in answers}, {b'{"ok":true}'})
        self.assertEqual(sum(a.replayed for a in answers), CLIENTS - 1, answers)

    def test_duplicates_that_do_not_wait_are_409_or_replays_nginx_logs_once(self):
        nginx = self.start_nginx()
        proxy = self.start_proxy(nginx.port, duplicates={"wait_ms": 0})
        key = self.key()
        answers = self.fifty(proxy.port, "/payments", key)
        self.assertEqual(nginx.forwarded(key), 1, nginx.lines(key))
        fresh = [a for a in answers if a.status == 201 and not a.replayed]
        self.assertEqual(len(fresh), 1, answers)
        for a in answers:
            if a.status == 409:
                self.assert_problem(a, "in_progress")
                self.assertGreaterEqual(int(a.header("Retry-After")), 1, a)
            else:
                self.assertEqual((a.status, a.body), (201, b'{"ok":true}'), a)
        # Once the one answer is recorded, every repeat is its replay.
        self.assertTrue(raw_http.post(proxy.port, "/payments", key).replayed)
        self.assertEqual(nginx.forwarded(key), 1)

    def test_duplicates_of_a_held_request_are_409_with_the_lease_as_retry_after(self):
        upstream = self.start_py()
        proxy = self.start_proxy(upstream.port, duplicates={"wait_ms": 0},
                                 store={"lease_ms": 30000}, upstream={"response_timeout_ms": 20000})
        key = self.key()
        with raw_http.RawConnection(proxy.port) as first:
            first.send(raw_http.post_request("/py/pay?gate=1", key, b"{}"))
            upstream.wait_count(key, 1)
            # The upstream holds the first: every duplicate meets it in flight.
            answers = self.concurrently(
                [lambda: raw_http.post(proxy.port, "/py/pay?gate=1", key, b"{}")] * (CLIENTS - 1))
            for a in answers:
                self.assert_problem(a, "in_progress")
                self.assertTrue(1 <= int(a.header("Retry-After")) <= 30, a)
            upstream.open_gate()
            answer = first.read_response()
        self.assertEqual((answer.status, answer.replayed), (201, False), answer)
        self.assertEqual(upstream.count(key), 1)
        replay = raw_http.post(proxy.port, "/py/pay?gate=1", key, b"{}")
        self.assertEqual((replay.status, replay.body), (201, answer.body))
        self.assertEqual(upstream.count(key), 1)

    def test_duplicates_that_wait_for_a_held_request_get_its_answer(self):
        upstream = self.start_py()
        proxy = self.start_proxy(upstream.port, duplicates={"wait_ms": 30000})
        key = self.key()
        with raw_http.RawConnection(proxy.port) as first:
            first.send(raw_http.post_request("/py/pay?gate=1", key, b"{}"))
            upstream.wait_count(key, 1)
            waiters = [raw_http.RawConnection(proxy.port) for _ in range(CLIENTS - 1)]
            try:
                for w in waiters:
                    w.send(raw_http.post_request("/py/pay?gate=1", key, b"{}"))
                upstream.open_gate()
                answer = first.read_response()
                others = [w.read_response() for w in waiters]
            finally:
                for w in waiters:
                    w.close()
        self.assertEqual((answer.status, answer.replayed), (201, False), answer)
        for a in others:
            self.assertEqual((a.status, a.replayed, a.body), (201, True, answer.body), a)
        self.assertEqual(upstream.count(key), 1)


if __name__ == "__main__":
    case.main()
