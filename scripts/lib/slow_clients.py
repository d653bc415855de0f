#!/usr/bin/env python3
"""Slow clients for scripts/bench --http: holds N connections to 127.0.0.1:PORT that each send a
request line and then one header line a second, never ending their head (slowloris). A connection
the server closes is opened again, so N stay connected until the process is stopped (SIGTERM).

    slow_clients.py PORT N
"""
import signal
import socket
import sys
import time


def open_one(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.setblocking(False)
    s.send(b"POST /payments HTTP/1.1\r\nHost: bench\r\n")
    return s


def main():
    port, n = int(sys.argv[1]), int(sys.argv[2])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    clients = [open_one(port) for _ in range(n)]
    print(f"slow clients: {n} connected", file=sys.stderr, flush=True)
    line = 0
    while True:
        time.sleep(1)
        line += 1
        for i, s in enumerate(clients):
            try:
                while s.recv(65536):  # an answer (408) or the end: open another
                    pass
                s.close()
                clients[i] = open_one(port)
                continue
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                clients[i] = open_one(port)
                continue
            try:
                s.send(f"X-Slow-{line}: 1\r\n".encode())
            except OSError:
                s.close()
                clients[i] = open_one(port)


if __name__ == "__main__":
    main()
