#!/usr/bin/env python3
"""scripts/bench --http-stalled: what stalled clients cost the HTTP payments service.

    scripts/bench --http-stalled [--build DIR] [--server PATH] [--stalled N] [--slow N]
                                 [--samples N] [--out FILE.json]

Starts http_payments (DIR/examples/http_payments/http_payments, DIR defaults to build; or the
binary PATH) on a temporary SQLite file with room for every connection, and measures GET /health
and a fresh POST /payments, each on a new connection, one after the other (SAMPLES of each,
default 50): first with no other client, then with N connections (default 1000) that each sent a
request head announcing a body (Transfer-Encoding: chunked or Content-Length: 500000, in turn)
and then nothing, and N more (default 1000) that send their head a header line a second and
never end it (slowloris). Prints, and writes to FILE.json, each latency's p50, p99 and max in
milliseconds with the load average; a request not answered within 15 s counts as failed.
"""
import argparse
import json
import os
import pathlib
import resource
import socket
import subprocess
import sys
import tempfile
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAYMENT = b'{"amount": 1250, "currency": "EUR"}'
WAIT = 15.0


def request(port, raw):
    """Seconds until the whole answer to `raw` came back on a new connection; its status; None
    when it did not come within WAIT."""
    start = time.monotonic()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=WAIT) as s:
            s.settimeout(WAIT)
            s.sendall(raw)
            got = b""
            while b"\r\n\r\n" not in got:
                chunk = s.recv(65536)
                if not chunk:
                    return None, None
                got += chunk
            head, body = got.split(b"\r\n\r\n", 1)
            length = 0
            for line in head.split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value.strip())
            while len(body) < length:
                chunk = s.recv(65536)
                if not chunk:
                    break
                body += chunk
            return time.monotonic() - start, int(head[9:12])
    except OSError:
        return None, None


def measure(port, samples, tag):
    health = b"GET /health HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n"
    results = {}
    for name in ("health", "fresh"):
        times, failed, statuses = [], 0, {}
        for i in range(samples):
            raw = health
            if name == "fresh":
                raw = (b"POST /payments HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n"
                       b"Authorization: Bearer bench\r\nContent-Type: application/json\r\n"
                       b"Idempotency-Key: " + f"{tag}-{i}".encode() + b"\r\n"
                       b"Content-Length: " + str(len(PAYMENT)).encode() + b"\r\n\r\n" + PAYMENT)
            took, status = request(port, raw)
            if took is None:
                failed += 1
            else:
                times.append(took * 1000)
                statuses[status] = statuses.get(status, 0) + 1
            time.sleep(0.01)
        times.sort()
        pick = lambda q: round(times[min(len(times) - 1, int(q * len(times)))], 2) if times else None
        results[name] = {"p50_ms": pick(0.5), "p99_ms": pick(0.99),
                         "max_ms": round(times[-1], 2) if times else None,
                         "failed": failed, "statuses": statuses}
    return results


class Stalled:
    """N connections that sent a head announcing a body and nothing after it, and N that send a
    header line a second (their head never ends)."""

    def __init__(self, port, stalled, slow):
        self.bodies, self.heads, self.stop = [], [], False
        for i in range(stalled):
            framing = b"Transfer-Encoding: chunked" if i % 2 else b"Content-Length: 500000"
            s = socket.create_connection(("127.0.0.1", port))
            s.sendall(b"POST /payments HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer bench\r\n"
                      b"Idempotency-Key: stalled-" + str(i).encode() + b"\r\n" + framing +
                      b"\r\n\r\n")
            self.bodies.append(s)
        for _ in range(slow):
            s = socket.create_connection(("127.0.0.1", port))
            s.setblocking(False)
            s.send(b"POST /payments HTTP/1.1\r\nHost: bench\r\n")
            self.heads.append(s)
        self.thread = threading.Thread(target=self.trickle, daemon=True)
        self.thread.start()

    def trickle(self):
        line = 0
        while not self.stop:
            time.sleep(1)
            line += 1
            for s in self.heads:
                try:
                    s.send(b"X-Slow-%d: 1\r\n" % line)
                except OSError:
                    pass

    def close(self):
        self.stop = True
        self.thread.join()
        for s in self.bodies + self.heads:
            s.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--build", default=str(ROOT / "build"))
    ap.add_argument("--server")
    ap.add_argument("--stalled", type=int, default=1000)
    ap.add_argument("--slow", type=int, default=1000)
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--out")
    args = ap.parse_args()
    server = args.server or os.path.join(args.build, "examples/http_payments/http_payments")
    if not os.access(server, os.X_OK):
        sys.exit(f"bench --http-stalled: {server} is missing (build http_payments)")
    # Every connection is a file descriptor, here and in the server.
    connections = args.stalled + args.slow + 100
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + 100 if hard == resource.RLIM_INFINITY else min(hard, connections + 100)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < connections:
        sys.exit(f"bench --http-stalled: {connections} connections need `ulimit -n {connections}`")

    with tempfile.TemporaryDirectory() as tmp:
        proc = subprocess.Popen([server, "--port", "0", "--db", os.path.join(tmp, "p.db"),
                                 "--max-connections", str(connections)],
                                stdout=subprocess.PIPE, text=True)
        try:
            port = int(proc.stdout.readline().rsplit(":", 1)[1])
            load = lambda: os.getloadavg()[0]
            report = {"server": server, "stalled_bodies": args.stalled, "slowloris": args.slow,
                      "samples": args.samples, "cpus": os.cpu_count()}
            report["load_start"] = load()
            report["alone"] = measure(port, args.samples, "alone")
            stalled = Stalled(port, args.stalled, args.slow)
            time.sleep(1)  # the server has read every head
            report["load_stalled"] = load()
            report["with_stalled"] = measure(port, args.samples, "stalled")
            stalled.close()
            report["load_end"] = load()
        finally:
            proc.terminate()
            proc.wait()
    print(f"bench --http-stalled: {args.stalled} stalled bodies + {args.slow} slowloris heads, "
          f"{args.samples} samples, load average {report['load_start']:.1f} -> "
          f"{report['load_end']:.1f}, {report['cpus']} CPUs")
    print("| | health p50 | p99 | max | failed | fresh p50 | p99 | max | failed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key, label in (("alone", "no other client"), ("with_stalled", "stalled clients")):
        h, f = report[key]["health"], report[key]["fresh"]
        print(f"| {label} | {h['p50_ms']} ms | {h['p99_ms']} ms | {h['max_ms']} ms | {h['failed']} "
              f"| {f['p50_ms']} ms | {f['p99_ms']} ms | {f['max_ms']} ms | {f['failed']} |")
    if args.out:
        pathlib.Path(args.out).write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
