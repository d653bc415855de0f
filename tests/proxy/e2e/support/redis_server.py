"""A throwaway redis-server of the test's own (no other client's commands in its counts), and
what the server itself reports of the commands it ran: MONITOR's stream, which tells a client's
commands from those its scripts ran."""
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import uuid

from . import upstreams


def redis_server_binary():
    found = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not os.access(found, os.X_OK):
        raise AssertionError("redis-server not found (Debian: redis-server; scripts/deps test "
                             "installs it)")
    return found


class RedisServer:
    """redis-server on a free port of 127.0.0.1, without persistence, in a folder of its own."""

    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="idem-e2e-redis.")
        self.port = upstreams.free_port()
        self.process = subprocess.Popen(
            [redis_server_binary(), "--bind", "127.0.0.1", "--port", str(self.port), "--save", "",
             "--appendonly", "no", "--dir", self.folder],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if not upstreams.wait_listening(self.port, self.process):
            raise AssertionError("redis-server exited at start")
        self.uri = f"redis://127.0.0.1:{self.port}"

    def monitor(self):
        """A Monitor of this server: start it, run the commands to count, then commands()."""
        return Monitor(self.port)

    def stop(self):
        upstreams.stop_process(self.process)
        shutil.rmtree(self.folder, ignore_errors=True)


# A MONITOR line: "<time> [<db> <client address> | lua] "<command>" "<argument>" ..."
MONITOR_LINE = re.compile(r'^\+\d+\.\d+ \[\d+ ([^\]]+)\] "([^"]*)"')


class Monitor:
    """Every command the server runs from now on, as MONITOR reports it."""

    def __init__(self, port):
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.sock.sendall(b"*1\r\n$7\r\nMONITOR\r\n")
        self.buffer = b""
        self._line()  # +OK

    def _line(self):
        while b"\r\n" not in self.buffer:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise AssertionError("redis-server closed the MONITOR connection")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\r\n")
        return line.decode("utf-8", "replace")

    def commands(self):
        """[(source, command)] run since the start, in order: source "lua" for a command a
        script ran, else the client's address. Ends with a marker this call sends, so that every
        command before it has been reported; the monitor is closed after."""
        marker = f"idem-e2e-marker-{uuid.uuid4().hex}"
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as s:
            s.sendall(f"*2\r\n$4\r\nECHO\r\n${len(marker)}\r\n{marker}\r\n".encode())
            s.recv(1024)
        out = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = self._line()
            if marker in line:
                self.sock.close()
                return out
            match = MONITOR_LINE.match(line)
            if match:
                out.append((match.group(1), match.group(2).lower()))
        raise AssertionError("MONITOR did not report the marker within 30 s")
