#!/usr/bin/env python3
"""What the proxy refuses before the upstream sees it, as idem's problem+json: another payload
under a key (422), a bad key, two keys or none on a required route (400). Routes that only honour
a key forward a request without one, unguarded."""
from support import case, raw_http

PAYMENT = b'{"amount":1250,"currency":"EUR"}'


class Refusals(case.ProxyTestCase):
    def setUp(self):
        super().setUp()
        self.nginx = self.start_nginx()
        self.proxy = self.start_proxy(self.nginx.port)

    def test_another_payload_under_a_used_key_is_422_and_not_forwarded(self):
        key = self.key()
        first = raw_http.post(self.proxy.port, "/payments", key, PAYMENT)
        self.assertEqual(first.status, 201)
        other_body = raw_http.post(self.proxy.port, "/payments", key, b'{"amount":9999}')
        self.assert_problem(other_body, "payload_mismatch")
        other_query = raw_http.post(self.proxy.port, "/payments?x=1", key, PAYMENT)
        self.assert_problem(other_query, "payload_mismatch")
        other_type = raw_http.exchange(self.proxy.port, "POST", "/payments", [
            ("Content-Type", "text/plain"), ("Idempotency-Key", f'"{key}"')], PAYMENT)
        self.assert_problem(other_type, "payload_mismatch")
        # A header the fingerprint leaves out (fingerprint.headers: Content-Type) changes nothing.
        same = raw_http.post(self.proxy.port, "/payments", key, PAYMENT, [("X-Trace", "42")])
        self.assertEqual((same.status, same.replayed), (201, True), same)
        self.assertEqual(self.nginx.forwarded(key), 1)

    def test_bad_keys_are_400_key_invalid_and_not_forwarded(self):
        marker = self.key("bad")
        for value in ('""', f'"{marker}', f'"{marker}";;', f'"{marker}" "x"', "a" * 300):
            answer = raw_http.exchange(self.proxy.port, "POST", f"/payments?{marker}", [
                ("Content-Type", "application/json"), ("Idempotency-Key", value)], PAYMENT)
            self.assert_problem(answer, "key_invalid")
        self.assertEqual(self.nginx.forwarded(marker), 0)

    def test_two_key_fields_are_400_and_not_forwarded(self):
        key = self.key()
        answer = raw_http.exchange(self.proxy.port, "POST", "/payments", [
            ("Content-Type", "application/json"), ("Idempotency-Key", f'"{key}"'),
            ("Idempotency-Key", f'"{key}"')], PAYMENT)
        self.assert_problem(answer, "key_invalid")
        self.assertEqual(self.nginx.forwarded(key), 0)

    def test_a_required_route_without_a_key_is_400_and_not_forwarded(self):
        marker = self.key("nokey")
        answer = raw_http.post(self.proxy.port, f"/payments?{marker}", None, PAYMENT)
        self.assert_problem(answer, "key_invalid")
        self.assertEqual(self.nginx.forwarded(marker), 0)

    def test_an_honoured_route_forwards_without_a_key_and_guards_with_one(self):
        marker = self.key("orders")
        for _ in range(2):
            answer = raw_http.post(self.proxy.port, f"/orders/{marker}", None, PAYMENT)
            self.assertEqual((answer.status, answer.replayed), (201, False), answer)
        self.assertEqual(self.nginx.forwarded(marker), 2)
        key = self.key()
        answers = [raw_http.post(self.proxy.port, "/orders/a/b", key, PAYMENT) for _ in range(2)]
        self.assertEqual([(a.status, a.replayed) for a in answers], [(201, False), (201, True)])
        self.assertEqual(self.nginx.forwarded(key), 1)

    def test_a_request_no_route_matches_is_forwarded_unguarded(self):
        key = self.key()
        for method in ("GET", "PUT"):
            answer = raw_http.exchange(self.proxy.port, method, "/elsewhere",
                                       [("Idempotency-Key", f'"{key}"')])
            self.assertEqual((answer.status, answer.body), (404, b"no such thing"), answer)
            self.assertFalse(answer.replayed)
        # GET /payments: the route is POST's alone.
        answer = raw_http.exchange(self.proxy.port, "GET", "/payments",
                                   [("Idempotency-Key", f'"{key}"')])
        self.assertEqual(answer.status, 201, answer)
        self.assertEqual(self.nginx.forwarded(key), 3)


if __name__ == "__main__":
    case.main()
