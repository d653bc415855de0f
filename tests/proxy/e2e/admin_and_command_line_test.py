#!/usr/bin/env python3
"""What an operator meets: the admin listener's /health and /metrics, and the command line's
--check-config, --help, --version and its refusals."""
import os
import re

from support import case, proxy_process, raw_http

# A Prometheus text-format sample line: name, optional labels, value.
SAMPLE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eEinfNa]+( [0-9]+)?$')


class Admin(case.ProxyTestCase):
    def test_health_is_ok_and_metrics_are_prometheus_text_that_count_forwards(self):
        nginx = self.start_nginx()
        proxy = self.start_proxy(nginx.port)
        health = raw_http.exchange(proxy.admin_port, "GET", "/health")
        self.assertEqual(health.status, 200, health)
        self.assertEqual(health.body.replace(b" ", b""), b'{"status":"ok"}')
        key = self.key()
        for _ in range(3):
            self.assertEqual(raw_http.post(proxy.port, "/payments", key).status, 201)
        metrics = raw_http.exchange(proxy.admin_port, "GET", "/metrics")
        self.assertEqual(metrics.status, 200, metrics)
        self.assertTrue(metrics.header("Content-Type").startswith("text/plain"), metrics)
        text = metrics.body.decode()
        for line in text.splitlines():
            if line and not line.startswith("#"):
                self.assertRegex(line, SAMPLE)
        self.assertIn("# TYPE", text)
        # The admin paths belong to the admin listener alone: on the proxy's port they are the
        # upstream's (nginx answers 404 for them).
        self.assertEqual(raw_http.exchange(proxy.port, "GET", "/health").status, 404)
        self.assertEqual(nginx.forwarded("/health"), 1)


class CommandLine(case.ProxyTestCase):
    def config_file(self, text):
        path = os.path.join(self.workdir, "check.toml")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_check_config_accepts_a_good_file_with_overrides(self):
        path = self.config_file(proxy_process.to_toml(
            proxy_process.base_config(8081, self.sqlite_uri())))
        status, out, err = proxy_process.run_cli(
            ["--config", path, "--check-config", "--set", "duplicates.wait_ms=2000",
             "--set", 'fingerprint.headers=["Content-Type", "X-Tenant"]', "--upstream",
             "127.0.0.1:9"])
        self.assertEqual((status, out.strip()), (0, "config OK"), err)

    def test_check_config_names_each_mistake_with_its_place(self):
        path = self.config_file('threads = 2\n[upstream]\nport = 70000\n[nonsense]\nx = 1\n')
        status, out, err = proxy_process.run_cli(["--config", path, "--check-config"])
        self.assertEqual(status, 2, out + err)
        self.assertIn(f"{path}:3:", err)
        self.assertIn("upstream.port", err)
        self.assertIn(f"{path}:4:", err)

    def test_a_bad_override_is_a_usage_error(self):
        status, out, err = proxy_process.run_cli(
            ["--upstream", "127.0.0.1:9", "--set", "limits.body_bytes=0", "--check-config"])
        self.assertEqual(status, 2, out + err)
        self.assertIn("limits.body_bytes", err)

    def test_help_and_version(self):
        status, out, _ = proxy_process.run_cli(["--help"])
        self.assertEqual(status, 0)
        for option in ("--config", "--listen", "--upstream", "--store", "--admin", "--set",
                       "--check-config", "--version"):
            self.assertIn(option, out)
        status, out, _ = proxy_process.run_cli(["--version"])
        self.assertEqual(status, 0)
        self.assertRegex(out, r"idem-proxy.*\d+\.\d+\.\d+")


if __name__ == "__main__":
    case.main()
