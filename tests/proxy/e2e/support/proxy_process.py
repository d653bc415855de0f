"""idem-proxy run as its users run it: a config file, a child process, signals."""
import copy
import os
import queue
import re
import signal
import subprocess
import tempfile
import threading
import time

START_BOUND_S = 20.0
EXIT_BOUND_S = 30.0


def proxy_binary():
    path = os.environ.get("IDEM_PROXY_BIN")
    if not path or not os.access(path, os.X_OK):
        raise AssertionError(f"IDEM_PROXY_BIN does not name the idem-proxy binary: {path!r}")
    return path


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def to_toml(config):
    """The config file for `config`: scalars first, then one [table] per dict, one [[route]] per
    route."""
    lines = [f"{k} = {toml_value(v)}" for k, v in config.items()
             if not isinstance(v, dict) and k != "route"]
    for section, fields in config.items():
        if isinstance(fields, dict):
            lines.append(f"\n[{section}]")
            lines += [f"{k} = {toml_value(v)}" for k, v in fields.items()]
    for route in config.get("route", []):
        lines.append("\n[[route]]")
        lines += [f"{k} = {toml_value(v)}" for k, v in route.items()]
    return "\n".join(lines) + "\n"


def merged(base, overrides):
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key].update(value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def base_config(upstream_port, store_uri, **overrides):
    """The tests' configuration: free ports, POST /payments needs a key, POST /orders/* honours
    one, POST /py/* needs one (the Python upstream's paths), the admin listener on."""
    config = {
        "threads": 2,
        "drain_timeout_ms": 20000,
        "listen": {"address": "127.0.0.1", "port": 0},
        "upstream": {"host": "127.0.0.1", "port": upstream_port},
        "store": {"uri": store_uri, "scope": "e2e"},
        "duplicates": {"wait_ms": 10000},
        "admin": {"address": "127.0.0.1", "port": 0},
        "route": [
            {"method": "POST", "path": "/payments", "key": "required"},
            {"method": "POST", "path": "/orders/*", "key": "honoured"},
            {"method": "POST", "path": "/py/*", "key": "required"},
        ],
    }
    return merged(config, overrides)


class Proxy:
    """One idem-proxy process. `port` and `admin_port` are read off its stdout."""

    def __init__(self, config, workdir=None, args=()):
        self.workdir = workdir or tempfile.mkdtemp(prefix="idem-e2e-proxy.")
        self.config_path = os.path.join(self.workdir, f"proxy-{time.monotonic_ns()}.toml")
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.write(to_toml(config))
        self.stderr_path = self.config_path + ".stderr"
        with open(self.stderr_path, "wb") as stderr:
            self.process = subprocess.Popen(
                [proxy_binary(), "--config", self.config_path, *args], stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=stderr)
        self.lines = queue.Queue()
        # stdout is read to its end so the proxy never blocks on a full pipe.
        threading.Thread(target=self._read_stdout, daemon=True).start()
        self.port = self._expect(r"^listening on https?://127\.0\.0\.1:(\d+)$")
        self.admin_port = None
        if config.get("admin", {}).get("port", -1) >= 0:
            self.admin_port = self._expect(r"^admin on http://127\.0\.0\.1:(\d+)$")

    def _read_stdout(self):
        for line in self.process.stdout:
            self.lines.put(line.decode("utf-8", "replace").rstrip("\n"))
        self.lines.put(None)

    def _expect(self, pattern):
        deadline = time.monotonic() + START_BOUND_S
        try:
            line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            line = None
        match = re.match(pattern, line or "")
        if not match:
            self.kill()
            raise AssertionError(f"idem-proxy printed {line!r}, not /{pattern}/; stderr:\n"
                                 f"{self.stderr()}")
        return int(match.group(1))

    def stderr(self):
        with open(self.stderr_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def signal(self, sig):
        self.process.send_signal(sig)

    def wait(self, bound_s=EXIT_BOUND_S):
        """The exit status; fails when the proxy is still running after `bound_s`."""
        try:
            return self.process.wait(bound_s)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"idem-proxy still running {bound_s} s after it was told to "
                                 f"stop; stderr:\n{self.stderr()}") from None

    def kill(self):
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(EXIT_BOUND_S)

    def stop(self):
        """SIGTERM, and SIGKILL if it has not exited within the bound; returns the status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(EXIT_BOUND_S)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode


def run_cli(args, bound_s=EXIT_BOUND_S):
    """idem-proxy ARGS to its end: (status, stdout, stderr)."""
    done = subprocess.run([proxy_binary(), *args], stdin=subprocess.DEVNULL, capture_output=True,
                          timeout=bound_s, check=False)
    return (done.returncode, done.stdout.decode("utf-8", "replace"),
            done.stderr.decode("utf-8", "replace"))
