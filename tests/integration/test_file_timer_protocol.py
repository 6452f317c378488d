"""cxxrun's file-timer watchdog server against torch's FileTimerClient
(docs/torchrun-compat.md §10.4): the probe binary runs agent/file_timer for a few seconds and
prints each expiry; clients are torch's own (Debian torch 1.13) and raw JSON
lines written the way torch writes them.

Every wait has a deadline: a hang fails the test instead of CI.
"""
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
import unittest

PROBE = os.environ.get("FILE_TIMER_PROBE", "")

try:
    from torch.distributed.elastic.timer import FileTimerClient, expires
    HAVE_TORCH = True
except ImportError:
    HAVE_TORCH = False

# Long enough for every client below to write and for its timers to expire;
# the probe polls every 0.1 s.
PROBE_SECONDS = 2.0


class Probe:
    def __init__(self, path=None):
        args = [PROBE, str(PROBE_SECONDS)] + ([path] if path else [])
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        # Raw reads, so nothing waits in a Python buffer that select cannot
        # see; the server's own log lines may come first on the same stdout.
        self.early = b""
        self.path = None
        deadline = time.monotonic() + 10
        while self.path is None:
            ready, _, _ = select.select([self.proc.stdout], [], [], max(0, deadline - time.monotonic()))
            chunk = os.read(self.proc.stdout.fileno(), 65536) if ready else b""
            if not chunk:
                self.proc.kill()
                raise AssertionError(f"file_timer_probe did not start within 10 s: {self.early!r}")
            self.early += chunk
            for line in self.early.split(b"\n")[:-1]:  # complete lines only
                if line.startswith(b"path "):
                    self.path = line[len(b"path "):].decode()

    def expiries(self):
        """Waits for the probe to finish; returns [(pid, signal, scope_id)]."""
        out, err = self.proc.communicate(timeout=PROBE_SECONDS + 10)
        out, err = (self.early + out).decode(), err.decode()
        if self.proc.returncode != 0 or not out.rstrip().endswith("done"):
            raise AssertionError(f"probe failed ({self.proc.returncode}): {out}\n{err}")
        found = []
        for line in out.splitlines():
            if line.startswith("expired "):
                _, pid, sig, scope = line.split(" ", 3)
                found.append((int(pid), int(sig), scope))
        self.log = out + err
        return found


def write_raw(path, data):
    """One client write as FileTimerClient does it: non-blocking open, write, close."""
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    try:
        os.write(fd, data.encode())
    finally:
        os.close(fd)


def request(pid, scope, expiration, sig):
    return json.dumps({"version": 1, "pid": pid, "scope_id": scope,
                       "expiration_time": expiration, "signal": sig}) + "\n"


@unittest.skipUnless(PROBE, "FILE_TIMER_PROBE is not set")
class RawProtocolTest(unittest.TestCase):
    def test_raw_request_lines(self):
        probe = Probe()
        now = time.time()
        write_raw(probe.path, request(1001, "expires", now + 0.2, int(signal.SIGUSR1)))
        write_raw(probe.path, request(1002, "released", now + 0.2, 9))
        write_raw(probe.path, request(1002, "released", -1, 0))
        write_raw(probe.path, request(1003, "far", now + 3600, 9))
        write_raw(probe.path, "this is not json\n")
        # One request split across two writes on one open FIFO.
        fd = os.open(probe.path, os.O_WRONLY | os.O_NONBLOCK)
        try:
            line = request(1004, "split", now + 0.2, 15)
            os.write(fd, line[:20].encode())
            time.sleep(0.3)
            os.write(fd, line[20:].encode())
        finally:
            os.close(fd)
        got = probe.expiries()
        self.assertEqual(sorted(got), [(1001, int(signal.SIGUSR1), "expires"), (1004, 15, "split")])
        self.assertIn("malformed", probe.log)  # logged, then ignored

    def test_given_path_replaces_a_file_and_is_removed(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "timer")
            with open(path, "w") as f:
                f.write("stale")
            probe = Probe(path)
            self.assertEqual(probe.path, path)
            write_raw(path, request(77, "s", time.time(), 9))
            self.assertEqual(probe.expiries(), [(77, 9, "s")])
            self.assertFalse(os.path.exists(path))


@unittest.skipUnless(PROBE, "FILE_TIMER_PROBE is not set")
@unittest.skipUnless(HAVE_TORCH, "torch.distributed.elastic.timer is not importable")
class TorchClientTest(unittest.TestCase):
    def test_torch_client_acquire_release_and_expires(self):
        # The default client kills with SIGKILL; from another pid so that its
        # expiry is reported on its own. That child imports torch first (seconds
        # on some machines, longer than the probe lives), says so, and only
        # then gets the path.
        child = subprocess.Popen(
            [sys.executable, "-c",
             "import os, sys, time\n"
             "from torch.distributed.elastic.timer import FileTimerClient\n"
             "print('ready', flush=True)\n"
             "path = sys.stdin.readline().strip()\n"
             "FileTimerClient(path).acquire('default_signal', time.time() + 0.2)\n"
             "print(os.getpid(), flush=True)\n"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            ready, _, _ = select.select([child.stdout], [], [], 60)
            self.assertTrue(ready and child.stdout.readline().strip() == "ready", "the child never imported torch")
            probe = Probe()
            child.stdin.write(probe.path + "\n")
            child.stdin.flush()
            client = FileTimerClient(probe.path, signal=signal.SIGUSR1)
            client.acquire("hung", time.time() + 0.3)
            client.acquire("released", time.time() + 0.3)
            client.release("released")
            with expires(after=0.3, scope="finished_in_time", client=client):
                pass
            out, err = child.communicate(timeout=30)
        finally:
            child.kill()
        self.assertEqual(child.returncode, 0, err)
        child_pid = int(out.strip())
        got = probe.expiries()
        self.assertEqual(sorted(got), sorted([(os.getpid(), int(signal.SIGUSR1), "hung"),
                                              (child_pid, int(signal.SIGKILL), "default_signal")]))


if __name__ == "__main__":
    unittest.main()
