"""cxxrun-rdzv against the real thing: torch's own TCPStore client (Debian's
torch 1.13, legacy protocol) and the binary's command-line contract.

Every wait here has a deadline: a hang fails the test instead of CI.
"""
import json
import os
import re
import select
import signal
import socket
import subprocess
import time
import unittest

from harness import CXXRUN, TORCH_PYTHON, clean_env

RDZV = os.path.join(os.path.dirname(os.path.abspath(CXXRUN)), "cxxrun-rdzv")

# Runs inside TORCH_PYTHON with the store's port as argv[1]; prints one JSON
# object of what torch saw.
CLIENT = r"""
import json, sys, threading, time
from datetime import timedelta
import torch.distributed as dist

port = int(sys.argv[1])
out = {}
s = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=5))
s.set("key", "value")
out["get"] = s.get("key").decode()
out["add"] = [s.add("cnt", 5), s.add("cnt", 2)]
out["cnt"] = s.get("cnt").decode()
out["cas"] = [s.compare_set(k, e, d).decode() for k, e, d in [
    ("cas", "", "first"), ("cas", "first", "second"), ("cas", "wrong", "third"),
    ("absent", "expected", "x")]]
out["num_keys"] = s.num_keys()
out["delete"] = [s.delete_key("key"), s.delete_key("key")]
out["num_keys_after_delete"] = s.num_keys()

started = time.monotonic()
try:
    s.wait(["never"], timedelta(seconds=1))
    out["wait_error"] = None
except RuntimeError as e:
    out["wait_error"] = str(e)
out["wait_seconds"] = time.monotonic() - started
# 1.13 does not cancel: the server keeps that wait, and must stay quiet about
# it, so the connection still answers correctly.
out["after_timeout"] = s.get("cnt").decode()

p = dist.PrefixStore("pfx", s)
p.set("a", "b")
out["prefix_get"] = p.get("a").decode()
out["prefix_raw"] = s.get("pfx/a").decode()
out["prefix_add"] = p.add("n", 3)

other = dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=5))
out["other_sees"] = other.get("cnt").decode()
woken = {}
def waiter():
    started = time.monotonic()
    s.wait(["late"], timedelta(seconds=5))
    woken["seconds"] = time.monotonic() - started
    woken["value"] = s.get("late").decode()
t = threading.Thread(target=waiter)
t.start()
time.sleep(0.3)
other.set("late", "arrived")
t.join(10)
out["woken"] = woken
print(json.dumps(out))
"""


def torch_available():
    if not os.path.exists(TORCH_PYTHON):
        return False
    try:
        return subprocess.run([TORCH_PYTHON, "-c", "import torch.distributed"], timeout=120,
                              capture_output=True).returncode == 0
    except subprocess.TimeoutExpired:
        return False


def read_port(proc, timeout=20.0):
    """Waits for the 'listening on host:port' line; returns (port, line)."""
    deadline = time.monotonic() + timeout
    seen = ""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stderr], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
        m = re.search(r"listening on (\S+):(\d+)$", line.strip())
        if m:
            return int(m.group(2)), line
    raise AssertionError(f"cxxrun-rdzv never said where it listens; stderr: {seen!r}")


def recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise AssertionError(f"connection closed after {len(data)}/{n} bytes")
        data += chunk
    return data


class RdzvServer:
    def __init__(self, *args):
        self.proc = subprocess.Popen([RDZV, *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, env=clean_env())
        try:
            self.port, self.first_line = read_port(self.proc)
        except BaseException:
            self.kill()
            raise

    def stop(self, sig=signal.SIGTERM, timeout=10):
        self.proc.send_signal(sig)
        _, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, err

    def kill(self):
        if self.proc.returncode is None:
            self.proc.kill()
            self.proc.communicate(timeout=10)


class TorchClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not torch_available():
            raise unittest.SkipTest(f"torch is not importable by {TORCH_PYTHON}")

    def setUp(self):
        self.server = RdzvServer("--port", "0", "--host", "127.0.0.1")
        self.addCleanup(self.server.kill)

    def test_torch_113_client(self):
        p = subprocess.run([TORCH_PYTHON, "-c", CLIENT, str(self.server.port)], capture_output=True,
                           text=True, timeout=120, env=clean_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertEqual(out["get"], "value")
        self.assertEqual(out["add"], [5, 7])
        self.assertEqual(out["cnt"], "7")
        # compare_set, torch's quirk included: an absent key answers `expected`.
        self.assertEqual(out["cas"], ["first", "second", "second", "expected"])
        self.assertEqual(out["num_keys"], 3)
        self.assertEqual(out["delete"], [True, False])
        self.assertEqual(out["num_keys_after_delete"], 2)
        self.assertIsNotNone(out["wait_error"])
        self.assertIn("timeout", out["wait_error"].lower())
        self.assertLess(out["wait_seconds"], 4.0)
        self.assertEqual(out["after_timeout"], "7")
        self.assertEqual(out["prefix_get"], "b")
        self.assertEqual(out["prefix_raw"], "b")
        self.assertEqual(out["prefix_add"], 3)
        self.assertEqual(out["other_sees"], "7")
        self.assertEqual(out["woken"].get("value"), "arrived")
        self.assertLess(out["woken"]["seconds"], 4.0)

        code, err = self.server.stop()
        self.assertEqual(code, 0, err)


class CommandLineTest(unittest.TestCase):
    def run_rdzv(self, *args):
        p = subprocess.run([RDZV, *args], capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL, env=clean_env())
        return p.returncode, p.stdout, p.stderr

    def test_bad_flag(self):
        code, out, err = self.run_rdzv("--port", "1", "--bogus")
        self.assertEqual(code, 2)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertTrue(err.startswith("cxxrun-rdzv: error: "), err)

    def test_missing_and_bad_port(self):
        for args in ([], ["--port", "70000"], ["--port", "x"]):
            code, _, err = self.run_rdzv(*args)
            self.assertEqual(code, 2, args)
            self.assertTrue(err.startswith("cxxrun-rdzv: error: "), err)

    def test_port_in_use(self):
        with socket.socket() as busy:
            busy.bind(("127.0.0.1", 0))
            busy.listen(1)
            port = busy.getsockname()[1]
            code, _, err = self.run_rdzv("--port", str(port), "--host", "127.0.0.1")
        self.assertEqual(code, 1)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertIn(str(port), err)
        self.assertIn("in use", err)

    def test_signals_exit_cleanly(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            server = RdzvServer("--port", "0")
            self.addCleanup(server.kill)
            self.assertIn("listening on", server.first_line)
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as c:
                c.sendall(b"\x06")  # legacy GETNUMKEYS
                self.assertEqual(recv_exact(c, 8), (0).to_bytes(8, "little"))
                code, err = server.stop(sig)
            self.assertEqual(code, 0, err)
            self.assertEqual(err.count("listening on"), 0)  # said once, already read


if __name__ == "__main__":
    unittest.main()
