#!/usr/bin/env python3
"""idem-proxy's listener over TLS, with certificates of a throwaway CA made by openssl: answers
and replays as over plain HTTP; with principal.from = "client-certificate" each verified client
certificate is its own principal (subject and issuer); a client without a trusted certificate,
plain HTTP on the TLS port and a client that never handshakes reach nothing and are cut within
their bounds; unusable TLS files stop the proxy from starting, naming the field."""
import os
import socket
import ssl
import time

from support import case, proxy_process, raw_http, throwaway_ca


class TlsListener(case.ProxyTestCase):
    def setUp(self):
        super().setUp()
        self.ca = throwaway_ca.ThrowawayCa(self.workdir, "idem-e2e-ca")
        self.server_certificate, self.server_key = self.ca.server()

    def tls_proxy(self, upstream_port, client_ca=None, **overrides):
        listen = {"address": "127.0.0.1", "port": 0, "tls_certificate": self.server_certificate,
                  "tls_private_key": self.server_key}
        if client_ca is not None:
            listen["tls_client_ca"] = client_ca
            overrides.setdefault("principal", {"from": "client-certificate"})
        return self.start_proxy(upstream_port, listen=listen, **overrides)

    def client(self, certificate=None):
        """A client context that trusts the proxy's CA and presents `certificate` ((crt, key))."""
        context = ssl.create_default_context(cafile=self.ca.certificate)
        if certificate is not None:
            context.load_cert_chain(*certificate)
        return context

    def refused(self, port, context, key):
        """Whether a POST over `context` fails before any answer: the handshake or the first read
        ends in a TLS alert, a reset or a close (TLS 1.3 checks the client's certificate after the
        client's side of the handshake is done)."""
        try:
            answer = raw_http.post(port, "/payments", key, tls=context)
        except (ssl.SSLError, ConnectionError, raw_http.ConnectionClosed, OSError):
            return True
        self.fail(f"answered without a trusted client certificate: {answer}")
        return False

    def test_answers_and_replays_over_tls_as_over_plain_http(self):
        nginx = self.start_nginx()
        proxy = self.tls_proxy(nginx.port)
        key = self.key()
        context = self.client()
        first = raw_http.post(proxy.port, "/payments", key, tls=context)
        self.assertEqual((first.status, first.body, first.replayed), (201, b'{"ok":true}', False))
        with raw_http.RawConnection(proxy.port, tls=context) as conn:
            for _ in range(2):  # keep-alive over TLS
                conn.send(raw_http.post_request("/payments", key))
                replay = conn.read_response()
                self.assertTrue(replay.replayed, replay)
                self.assert_same_answer_but_date(first, replay)
        self.assertEqual(nginx.forwarded(key), 1)

    def test_each_client_certificate_is_its_own_principal(self):
        other_ca = throwaway_ca.ThrowawayCa(self.workdir, "idem-e2e-other-ca")
        trusted = os.path.join(self.workdir, "clients-ca.pem")
        with open(trusted, "w", encoding="ascii") as out:
            for path in (self.ca.certificate, other_ca.certificate):
                with open(path, encoding="ascii") as f:
                    out.write(f.read())
        alice = self.client(self.ca.client("alice", "alice"))
        bob = self.client(self.ca.client("bob", "bob"))
        # The same subject from the other trusted CA: another client.
        other_alice = self.client(other_ca.client("other-alice", "alice"))
        nginx = self.start_nginx()
        proxy = self.tls_proxy(nginx.port, client_ca=trusted)
        key = self.key()
        first = raw_http.post(proxy.port, "/payments", key, tls=alice)
        again = raw_http.post(proxy.port, "/payments", key, tls=alice)
        self.assertEqual((first.status, first.replayed, again.replayed), (201, False, True))
        self.assertEqual(nginx.forwarded(key), 1)
        for context in (bob, other_alice):
            answer = raw_http.post(proxy.port, "/payments", key, tls=context)
            self.assertEqual((answer.status, answer.replayed), (201, False), answer)
        self.assertEqual(nginx.forwarded(key), 3)
        self.assertTrue(raw_http.post(proxy.port, "/payments", key, tls=bob).replayed)
        self.assertEqual(nginx.forwarded(key), 3)

    def test_a_client_without_a_trusted_certificate_reaches_nothing(self):
        rogue_ca = throwaway_ca.ThrowawayCa(self.workdir, "idem-e2e-rogue-ca")
        nginx = self.start_nginx()
        proxy = self.tls_proxy(nginx.port, client_ca=self.ca.certificate)
        key = self.key()
        self.refused(proxy.port, self.client(), key)
        self.refused(proxy.port, self.client(rogue_ca.client("mallory", "alice")), key)
        self.assertEqual(nginx.forwarded(key), 0)
        # The proxy still serves a trusted client.
        alice = self.client(self.ca.client("alice", "alice"))
        self.assertEqual(raw_http.post(proxy.port, "/payments", key, tls=alice).status, 201)
        self.assertEqual(nginx.forwarded(key), 1)

    def test_plain_http_and_silent_clients_on_the_tls_port_are_cut(self):
        nginx = self.start_nginx()
        proxy = self.tls_proxy(nginx.port, limits={"request_timeout_ms": 1000})
        key = self.key()
        with raw_http.RawConnection(proxy.port) as plain:
            plain.send(raw_http.post_request("/payments", key))
            data = plain.read_until_closed(10)
            self.assertNotIn(b"HTTP/1.1 201", data)
        # Connected, never a byte: the handshake has request_timeout_ms, as a request does.
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=30) as silent:
            self.assertEqual(silent.recv(1), b"")
        self.assertLess(time.monotonic() - started, 10)
        # Half a request over TLS: 408 within the same bound.
        with raw_http.RawConnection(proxy.port, tls=self.client()) as slow:
            slow.send(b"POST /payments HTTP/1.1\r\nHost: e2e.test\r\n")
            self.assertEqual(slow.read_response().status, 408)
        self.assertEqual(nginx.forwarded(key), 0)

    def test_unusable_tls_files_stop_the_start_naming_the_field(self):
        nginx = self.start_nginx()
        _, other_key = self.ca.client("stranger", "stranger")
        missing = os.path.join(self.workdir, "missing.pem")
        cases = [
            ({"tls_certificate": missing, "tls_private_key": self.server_key},
             "listen.tls_certificate"),
            ({"tls_certificate": self.server_certificate, "tls_private_key": other_key},
             "listen.tls_private_key"),
            ({"tls_certificate": self.server_certificate, "tls_private_key": self.server_key,
              "tls_client_ca": missing}, "listen.tls_client_ca"),
        ]
        for listen, field in cases:
            config = proxy_process.base_config(nginx.port, self.sqlite_uri(),
                                               listen={"address": "127.0.0.1", "port": 0,
                                                       **listen})
            path = os.path.join(self.workdir, f"{field}.toml")
            with open(path, "w", encoding="utf-8") as f:
                f.write(proxy_process.to_toml(config))
            status, _, stderr = proxy_process.run_cli(["--config", path])
            self.assertEqual(status, 1, stderr)
            self.assertIn(field, stderr)


if __name__ == "__main__":
    case.main()
