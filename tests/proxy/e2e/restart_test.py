#!/usr/bin/env python3
"""A proxy SIGKILLed while the upstream holds a request, restarted on the same SQLite file: a
retry before the lease ends is 409 and not forwarded; after it, forwarded once; every answer the
killed proxy completed is replayed. And SIGTERM drains: the request in hand completes, exit 0,
its key replays after a restart; a drain cut by drain_timeout exits 3 and leaves the cut key to
its lease (docs/proxy.md, "Drain")."""
import json
import signal
import time

from support import case, raw_http

LEASE_MS = 6000


class Restart(case.ProxyTestCase):
    def test_a_killed_proxy_loses_no_answer_and_forwards_nothing_twice(self):
        upstream = self.start_py()
        store = self.sqlite_uri()
        # The config refuses a lease no longer than a forward may take (connect + response).
        overrides = {"store": {"lease_ms": LEASE_MS}, "duplicates": {"wait_ms": 0},
                     "upstream": {"connect_timeout_ms": 1000, "response_timeout_ms": 3000}}
        proxy = self.start_proxy(upstream.port, store, **overrides)
        done = {}
        for n in range(5):
            key = self.key("done")
            done[key] = raw_http.post(proxy.port, "/py/pay", key, b"{}")
            self.assertEqual(done[key].status, 201)
        held = self.key("held")
        client = raw_http.RawConnection(proxy.port)
        self.addCleanup(client.close)
        client.send(raw_http.post_request("/py/pay?gate=1", held, b"{}"))
        upstream.wait_count(held, 1)
        killed_at = time.monotonic()
        proxy.kill()
        self.assertTrue(client.closed_within(10), "the killed proxy's client stays connected")

        restarted = self.start_proxy(upstream.port, store, **overrides)
        retry = raw_http.post(restarted.port, "/py/pay?gate=1", held, b"{}")
        self.assertLess(time.monotonic() - killed_at, LEASE_MS / 1000,
                        "the restart took longer than the lease: the test proves nothing")
        self.assert_problem(retry, "in_progress")
        self.assertTrue(1 <= int(retry.header("Retry-After")) <= LEASE_MS // 1000, retry)
        self.assertEqual(upstream.count(held), 1)

        for key, first in done.items():
            replay = raw_http.post(restarted.port, "/py/pay", key, b"{}")
            self.assertEqual((replay.status, replay.replayed, replay.body),
                             (201, True, first.body), key)

        upstream.open_gate()
        deadline = killed_at + LEASE_MS / 1000 + 20
        while True:
            retry = raw_http.post(restarted.port, "/py/pay?gate=1", held, b"{}")
            if retry.status != 409:
                break
            self.assert_problem(retry, "in_progress")
            self.assertEqual(upstream.count(held), 1)
            self.assertLess(time.monotonic(), deadline, "the lease never ended")
            time.sleep(min(1.0, int(retry.header("Retry-After"))))
        self.assertEqual((retry.status, retry.replayed), (201, False), retry)
        self.assertEqual(upstream.count(held), 2)
        self.assertEqual(json.loads(retry.body)["serial"], upstream.count_path("/py/pay"))
        again = raw_http.post(restarted.port, "/py/pay?gate=1", held, b"{}")
        self.assertEqual((again.status, again.replayed, again.body), (201, True, retry.body))
        self.assertEqual(upstream.count(held), 2)

    def test_sigterm_finishes_the_request_in_hand_and_exits_0(self):
        upstream = self.start_py()
        store = self.sqlite_uri()
        proxy = self.start_proxy(upstream.port, store)
        key = self.key()
        with raw_http.RawConnection(proxy.port) as client:
            client.send(raw_http.post_request("/py/pay?gate=1", key, b"{}"))
            upstream.wait_count(key, 1)
            proxy.signal(signal.SIGTERM)
            self.assertIsNone(proxy.process.poll())
            upstream.open_gate()
            answer = client.read_response()
        self.assertEqual((answer.status, answer.replayed), (201, False), answer)
        self.assertEqual(proxy.wait(), 0, proxy.stderr())

        restarted = self.start_proxy(upstream.port, store)
        replay = raw_http.post(restarted.port, "/py/pay?gate=1", key, b"{}")
        self.assertEqual((replay.status, replay.replayed, replay.body), (201, True, answer.body))
        self.assertEqual(upstream.count(key), 1)

    def test_a_drain_cut_by_its_bound_exits_3_and_leaves_the_key_to_its_lease(self):
        upstream = self.start_py()
        store = self.sqlite_uri()
        overrides = {"drain_timeout_ms": 500, "store": {"lease_ms": LEASE_MS},
                     "duplicates": {"wait_ms": 0},
                     "upstream": {"connect_timeout_ms": 1000, "response_timeout_ms": 3000}}
        proxy = self.start_proxy(upstream.port, store, **overrides)
        key = self.key()
        with raw_http.RawConnection(proxy.port) as client:
            client.send(raw_http.post_request("/py/pay?gate=1", key, b"{}"))
            upstream.wait_count(key, 1)
            cut_at = time.monotonic()
            proxy.signal(signal.SIGTERM)
            self.assertEqual(proxy.wait(), 3, proxy.stderr())
        # The cut request may still be in the upstream's hands: its key waits out the lease, as
        # a killed proxy's does, and is then forwarded once.
        restarted = self.start_proxy(upstream.port, store, **overrides)
        retry = raw_http.post(restarted.port, "/py/pay?gate=1", key, b"{}")
        self.assertLess(time.monotonic() - cut_at, LEASE_MS / 1000,
                        "the restart took longer than the lease: the test proves nothing")
        self.assert_problem(retry, "in_progress")
        self.assertEqual(upstream.count(key), 1)
        upstream.open_gate()
        deadline = cut_at + LEASE_MS / 1000 + 20
        while retry.status == 409:
            self.assertLess(time.monotonic(), deadline, "the lease never ended")
            time.sleep(min(1.0, int(retry.header("Retry-After"))))
            retry = raw_http.post(restarted.port, "/py/pay?gate=1", key, b"{}")
        self.assertEqual((retry.status, retry.replayed), (201, False), retry)
        self.assertEqual(upstream.count(key), 2)

if __name__ == "__main__":
    case.main()
