#!/usr/bin/env python3
"""What a request costs the store, as the store itself reports it: a redis-server of the test's
own, whose MONITOR stream names every command idem-proxy sent it (and those its scripts ran). A
fresh key costs the guard's own two atomic writes, the claim and the commit scripts, and no other
command; a replay costs one script call, which writes nothing, and none at all with the replay
cache on (store.cache_entries), where another payload still reaches the store and /metrics counts
the cache's hits and misses (docs/proxy.md, "Measured")."""
import collections
import re

from support import case, raw_http, redis_server

REQUESTS = 40
WRITES = {"hset", "hdel", "del", "set", "pexpire", "expire", "rpush", "lpush", "publish", "incr",
          "zadd", "zrem", "hincrby", "unlink"}


def post_each(test, port, keys, replayed):
    """POSTs each key once on one kept-alive connection; each answer is 201, replayed or not."""
    with raw_http.RawConnection(port) as conn:
        for key in keys:
            conn.send(raw_http.post_request("/payments", key))
            answer = conn.read_response()
            test.assertEqual((answer.status, answer.replayed), (201, replayed), answer)


def cache_events(metrics_text):
    """The proxy store's idem_store_cache_events_total samples, by event."""
    events = {}
    for m in re.finditer(r'^idem_store_cache_events_total\{([^}]*)\} (\d+)', metrics_text, re.M):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', m.group(1)))
        if labels.get("name") == "proxy":
            events[labels["event"]] = int(m.group(2))
    return events


def counted(commands):
    """(the proxy's commands by name, the scripts' write commands by name)."""
    sent = collections.Counter(c for source, c in commands if source != "lua")
    written = collections.Counter(c for source, c in commands if source == "lua" and c in WRITES)
    return sent, written


class StoreWrites(case.ProxyTestCase):
    def test_a_fresh_key_costs_the_guards_two_writes_and_a_replay_one_call(self):
        redis = redis_server.RedisServer()
        self.addCleanup(redis.stop)
        nginx = self.start_nginx()
        proxy = self.start_proxy(nginx.port, redis.uri)
        # The first request opens the connections and loads the scripts.
        self.assertEqual(raw_http.post(proxy.port, "/payments", self.key("warm")).status, 201)
        keys = [self.key() for _ in range(REQUESTS)]

        monitor = redis.monitor()
        post_each(self, proxy.port, keys, replayed=False)
        sent, written = counted(monitor.commands())
        print(f"fresh keys, {REQUESTS} requests: sent {dict(sent)}; scripts wrote {dict(written)}")
        for key in keys:
            self.assertEqual(nginx.forwarded(key), 1)
        self.assertEqual(dict(sent), {"evalsha": 2 * REQUESTS}, sent)

        monitor = redis.monitor()
        post_each(self, proxy.port, keys, replayed=True)
        sent, written = counted(monitor.commands())
        print(f"replays, {REQUESTS} requests: sent {dict(sent)}; scripts wrote {dict(written)}")
        self.assertEqual(dict(sent), {"evalsha": REQUESTS}, sent)
        self.assertEqual(dict(written), {}, written)
        for key in keys:
            self.assertEqual(nginx.forwarded(key), 1)

    def test_with_the_replay_cache_a_replay_sends_the_store_nothing(self):
        redis = redis_server.RedisServer()
        self.addCleanup(redis.stop)
        nginx = self.start_nginx()
        proxy = self.start_proxy(nginx.port, redis.uri, store={"cache_entries": 1000})
        keys = [self.key() for _ in range(REQUESTS)]
        post_each(self, proxy.port, keys, replayed=False)

        monitor = redis.monitor()
        post_each(self, proxy.port, keys, replayed=True)
        sent, _ = counted(monitor.commands())
        print(f"replays with the cache, {REQUESTS} requests: sent {dict(sent)}")
        self.assertEqual(dict(sent), {}, sent)

        # Another payload under a used key is the store's to judge: it is asked, and refuses.
        monitor = redis.monitor()
        other = raw_http.post(proxy.port, "/payments", keys[0], body=b'{"amount":2}')
        self.assert_problem(other, "payload_mismatch")
        sent, _ = counted(monitor.commands())
        self.assertEqual(dict(sent), {"evalsha": 1}, sent)

        # /metrics counts the cache's answers: the replays hit, the fresh keys and the other
        # payload went to the store.
        text = raw_http.exchange(proxy.admin_port, "GET", "/metrics").body.decode()
        self.assertEqual(cache_events(text), {"hit": REQUESTS, "miss": REQUESTS + 1,
                                              "eviction": 0}, text)
        for key in keys:
            self.assertEqual(nginx.forwarded(key), 1)


if __name__ == "__main__":
    case.main()
