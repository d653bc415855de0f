"""The base of every end-to-end test: the fixtures it starts are stopped after it, whatever
happens, and the helpers that check what idem-proxy promises of its answers."""
import concurrent.futures
import json
import shutil
import tempfile
import threading
import unittest
import uuid

from . import proxy_process, raw_http, upstreams

# idem's problem documents (include/idem/http/problem.hpp, include/idem/error.hpp): type, title
# and status of each error the proxy answers for a key.
PROBLEMS = {
    "key_invalid": ("key is empty, too long or unusable", 400),
    "payload_mismatch": ("key was first used with another payload", 422),
    "in_progress": ("another request with this key is in progress", 409),
}


class ProxyTestCase(unittest.TestCase):
    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="idem-e2e.")
        self.addCleanup(shutil.rmtree, self.workdir, True)

    def key(self, label="k"):
        return f"{label}-{uuid.uuid4().hex}"

    def sqlite_uri(self, name="records.db"):
        return f"sqlite://{self.workdir}/{name}"

    def start_nginx(self):
        nginx = upstreams.Nginx()
        self.addCleanup(nginx.stop)
        return nginx

    def start_py(self):
        upstream = upstreams.PyUpstream()
        self.addCleanup(upstream.stop)
        return upstream

    def start_proxy(self, upstream_port, store_uri=None, args=(), **overrides):
        config = proxy_process.base_config(upstream_port, store_uri or self.sqlite_uri(),
                                           **overrides)
        proxy = proxy_process.Proxy(config, self.workdir, args)
        self.addCleanup(proxy.kill)
        return proxy

    def concurrently(self, calls):
        """Runs every call of `calls` at once (each on its own thread, released together) and
        returns their results in order."""
        barrier = threading.Barrier(len(calls))

        def run(call):
            barrier.wait(30)
            return call()

        with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
            return list(pool.map(run, calls, timeout=120))

    def assert_problem(self, answer, name, detail_contains=None):
        """`answer` is idem's problem+json for the error `name`, byte for byte as problem_for
        builds it up to the detail."""
        title, status = PROBLEMS[name]
        self.assertEqual(answer.status, status, answer)
        self.assertEqual(answer.header("Content-Type"), "application/problem+json", answer)
        prefix = (f'{{"type":"urn:idem:problem:{name}","title":{json.dumps(title)},'
                  f'"status":{status}').encode()
        self.assertTrue(answer.body.startswith(prefix), answer.body)
        document = json.loads(answer.body)
        self.assertLessEqual(set(document), {"type", "title", "status", "detail", "instance"})
        if detail_contains is not None:
            self.assertIn(detail_contains, document.get("detail", ""))
        self.assertIsNone(answer.header("Idempotent-Replayed"), answer)
        return document

    def assert_same_answer_but_date(self, first, replay):
        """`replay` is `first` byte for byte, but for Date and the Idempotent-Replayed field."""
        self.assertFalse(first.replayed, first)
        self.assertTrue(replay.replayed, replay)
        first_raw, dates = raw_http.without_field(first.raw, "Date")
        self.assertEqual(dates, 1, first.raw)
        replay_raw, dates = raw_http.without_field(replay.raw, "Date")
        self.assertEqual(dates, 1, replay.raw)
        replay_raw, marks = raw_http.without_field(replay_raw, "Idempotent-Replayed")
        self.assertEqual(marks, 1, replay.raw)
        self.assertEqual(replay_raw, first_raw)


def main():
    unittest.main(verbosity=2)
