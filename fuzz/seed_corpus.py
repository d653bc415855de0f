#!/usr/bin/env python3
"""Writes the seed corpus in fuzz/corpus/<target>/: a few hand-picked inputs per fuzz target
(valid records and replies, and their usual corruptions) plus fixed pseudo-random ones.
Deterministic: running it again rewrites the same files. Usage: fuzz/seed_corpus.py"""

import pathlib
import random

ROOT = pathlib.Path(__file__).resolve().parent / "corpus"


def resp(*parts):
    """RESP for a reply tree: int, bytes, None (nil), list (array), or ("err", text)."""
    out = b""
    for p in parts:
        if isinstance(p, int):
            out += b":%d\r\n" % p
        elif isinstance(p, bytes):
            out += b"$%d\r\n%s\r\n" % (len(p), p)
        elif p is None:
            out += b"$-1\r\n"
        elif isinstance(p, tuple):
            out += b"-" + p[1] + b"\r\n"
        else:
            out += b"*%d\r\n" % len(p) + resp(*p)
    return out


def head(*lines):
    """A request head: the lines, each ended by CRLF, then the blank line."""
    return b"".join(line + b"\r\n" for line in lines) + b"\r\n"


PAYMENT = b'{"amount": 1250, "currency": "EUR"}'
FP = b"f" * 16  # the fingerprint fuzz/redis_reply_fuzz.cpp's cache decoder expects
HOLDER = bytes(range(1, 9))

SEEDS = {
    "fuzz_codec": {
        "empty": b"", "false": b"\x00", "true": b"\x01", "not_bool": b"\x02",
        "int32": b"\x2a\x00\x00\x00", "int64": b"\xff" * 8, "text": b"hello, idem",
    },
    "fuzz_stored_result": {
        "failure": b"F\x0acard declined", "failure_no_message": b"F\x0b",
        "unknown_code": b"F\x00oops", "code_past_end": b"F\x0cx", "untagged": b"X\x01",
        "empty": b"", "receipt": b"\x10\x27\x00\x00note", "receipt_bang": b"\x01\x00\x00\x00!",
    },
    "fuzz_http_headers": {
        "bare": b"order-42", "quoted": b'"8e03978e-40d5-43e8-bc93-6894a57f9324"',
        "escapes": b'"a\\"b\\\\c"', "unterminated": b'"abc', "trailing": b'"abc"x',
        "bad_escape": b'"a\\nb"', "control": b"k\x01", "long": b"k" * 300,
        "parameters": b'"k";p=1;q=?0;r="x";s=:aGk=:;t=tok/en', "bad_parameter": b'"k";P=1',
        "bearer": b"bearer  alice",
        "stored": b'idem-http/1 201\nLocation: /payments/pay_1\nETag: "1"\n\n{"id":"pay_1"}',
        "stored_bad": b"idem-http/1 20x\n\n{}",
    },
    # The payments example's transport: the first byte is how many bytes arrive at a time (0:
    # all at once), the rest what a client sends. The hostile corpus of
    # tests/http/http_hostile_corpus_test.cpp, and requests it is judged against.
    "fuzz_http_request": {
        "get": b"\x00" + head(b"GET /health HTTP/1.1", b"Host: t"),
        "post": b"\x05" + head(b"POST /payments HTTP/1.1", b"Host: t", b"Authorization: Bearer a",
                             b"Idempotency-Key: k", b"Content-Length: 35") + PAYMENT,
        "chunked": b"\x03" + head(b"POST /payments HTTP/1.1", b"Host: t",
                                b"Transfer-Encoding: chunked") + b"23;x=1\r\n" + PAYMENT
                   + b"\r\n0\r\n\r\n",
        "pipelined": b"\x00" + head(b"GET /health HTTP/1.1", b"Host: t") * 3,
        "http10": b"\x00" + head(b"GET /health HTTP/1.0"),
        "expect": b"\x00" + head(b"POST / HTTP/1.1", b"Host: t", b"Expect: 100-continue",
                               b"Content-Length: 2") + b"ok",
        "stalled_chunked": b"\x00" + head(b"POST /payments HTTP/1.1", b"Host: t",
                                        b"Transfer-Encoding: chunked"),
        "stalled_length": b"\x00" + head(b"POST /payments HTTP/1.1", b"Host: t",
                                       b"Content-Length: 500000"),
        "two_lengths": b"\x00" + head(b"POST /payments HTTP/1.1", b"Host: t", b"Content-Length: 35",
                                    b"Content-Length: 39") + PAYMENT + b"GET ",
        "xchunked": b"\x00" + head(b"POST / HTTP/1.1", b"Host: t", b"Transfer-Encoding: xchunked",
                                 b"Content-Length: 35") + PAYMENT,
        "chunked_identity": b"\x00" + head(b"POST / HTTP/1.1", b"Host: t",
                                         b"Transfer-Encoding: chunked, identity") + b"0\r\n\r\n",
        "te_and_length": b"\x00" + head(b"POST / HTTP/1.1", b"Host: t",
                                      b"Transfer-Encoding: chunked", b"Content-Length: 5")
                         + b"0\r\n\r\n",
        "te_in_http10": b"\x00" + head(b"POST / HTTP/1.0", b"Transfer-Encoding: chunked")
                        + b"0\r\n\r\n",
        "plus_length": b"\x00" + head(b"POST / HTTP/1.1", b"Host: t", b"Content-Length: +35")
                       + PAYMENT,
        "negative_length": b"\x00" + head(b"POST / HTTP/1.1", b"Host: t", b"Content-Length: -1"),
        "huge_length": b"\x00" + head(b"POST / HTTP/1.1", b"Host: t",
                                    b"Content-Length: 99999999999999999999"),
        "no_host": b"\x00" + head(b"GET /health HTTP/1.1"),
        "two_hosts": b"\x00" + head(b"GET /health HTTP/1.1", b"Host: a", b"Host: b"),
        "space_before_colon": b"\x00" + head(b"GET / HTTP/1.1", b"Host : t"),
        "negative_chunk": b"\x00" + head(b"POST / HTTP/1.1", b"Host: t",
                                       b"Transfer-Encoding: chunked") + b"-23\r\n" + PAYMENT,
        "nul_key": b"\x00" + head(b"POST / HTTP/1.1", b"Host: t", b"Idempotency-Key: X\x00AAAA"),
        "nul_bearer": b"\x00" + head(b"GET / HTTP/1.1", b"Host: t",
                                   b"Authorization: Bearer mallory\x00-not-alice"),
        "cr_value": b"\x00" + head(b"GET / HTTP/1.1", b"Host: t", b"X-Note: a\rb"),
        "control_value": b"\x00" + head(b"GET / HTTP/1.1", b"Host: t", b"X-Note: a\x01b"),
        "delete_value": b"\x00" + head(b"GET / HTTP/1.1", b"Host: t", b"X-Note: a\x7fb"),
        "two_keys": b"\x00" + head(b"POST / HTTP/1.1", b"Host: t", b"Idempotency-Key: a",
                                 b"Idempotency-Key: b", b"Content-Length: 0"),
        "obs_fold": b"\x00" + head(b"GET / HTTP/1.1", b"Host: t", b"X-Note: a", b" b"),
        "bare_lf": b"\x00GET / HTTP/1.1\nHost: t\n\n",
        "http2": b"\x00PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        "long_head": b"\x40" + b"GET / HTTP/1.1\r\nX: " + b"x" * 3000,
    },
    "fuzz_redis_reply": {
        "acquired": resp([0, 7, 0]), "took_over": resp([0, 8, 1]),
        "completed": resp([1, 7, b"result"]), "failed": resp([2, 7, b"F\x0aboom"]),
        "in_progress": resp([3, 7, 1500]), "mismatch": resp([4, 7]),
        "no_token": resp([5]), "token_mismatch": resp([6, 3]),
        "no_result": resp([1, 7]), "nil_result": resp([1, 7, None]),
        "negative_fence": resp([1, -1, b"r"]), "wide_code": resp([4294967297, 7, b"r"]),
        "fenced_ok": resp(1), "fenced_lost": resp(0), "fenced_odd": resp(7),
        "error": resp(("err", b"ERR unknown")), "cache_acquired": resp([]),
        "cache_completed": resp([b"C" + HOLDER + FP + b"ok", 5000]),
        "cache_pending": resp([b"P" + HOLDER + FP, 900]),
        "cache_other_fp": resp([b"C" + HOLDER + b"g" * 16 + b"ok", 5000]),
        "cache_short": resp([b"C" + HOLDER, 5000]),
        "cache_unknown_state": resp([b"Z" + HOLDER + FP, 5000]),
        "several": resp([0, 1, 0], 1, [3, 2, 10]),
    },
}

# Inputs read through FuzzedDataProvider have no readable layout: fixed pseudo-random bytes.
RANDOM = {"fuzz_keys": 12, "fuzz_sql_rows": 24}


def main():
    rng = random.Random(7)
    for target, seeds in SEEDS.items():
        d = ROOT / target
        d.mkdir(parents=True, exist_ok=True)
        for name, data in seeds.items():
            (d / name).write_bytes(data)
    for target, count in RANDOM.items():
        d = ROOT / target
        d.mkdir(parents=True, exist_ok=True)
        for i in range(count):
            size = rng.choice([8, 16, 32, 64, 128])
            (d / f"random_{i:02d}").write_bytes(bytes(rng.randrange(256) for _ in range(size)))


if __name__ == "__main__":
    main()
