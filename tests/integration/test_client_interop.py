"""Our store client against torch's own TCPStore server.

The probe (tests/store_client_probe.cc) runs a fixed script of store
operations; torch's server is hosted in this process, and torch's own client
then reads back what the probe left. Skipped where torch is not importable.
"""
import datetime
import os
import subprocess
import time
import unittest

PROBE = os.environ.get("STORE_CLIENT_PROBE",
                       os.path.join(os.path.dirname(__file__), "../../build/tests/store_client_probe"))

try:
    import torch
    import torch.distributed as dist
    HAVE_TORCH = dist.is_available()
except Exception:  # ImportError, or a broken install
    HAVE_TORCH = False


def torch_protocol():
    """The wire table torch's server speaks, or None for 2.1 (unknown; docs/store-protocol.md §1)."""
    major, minor = (int(x) for x in torch.__version__.split(".")[:2])
    if (major, minor) <= (2, 0):
        return "legacy"
    return None if (major, minor) == (2, 1) else "modern"


COMMON = [
    "connect => ok",
    "set k1 v1 => ok",
    "get k1 => v1",
    "add cnt 5 => 5",
    "add cnt 2 => 7",
    "get cnt => 7",
    "compare_set cas '' first => first",
    "compare_set cas first second => second",
    "compare_set cas wrong third => second",
    "compare_set absent x y => x",  # torch's quirk: absent key, non-empty expected
    "check k1 => true",
    "check k1 nope => false",
    "wait nope 300ms => timeout",
    "get k1 => v1",  # still usable after a timed-out wait
    "get nope 200ms => timeout",
    "num_keys => 3",  # /k1 /cnt /cas
    "delete_key k1 => true",
    "delete_key k1 => false",
    "check k1 => false",
    "set from_probe hello => ok",
    "local_address => 127.0.0.1",
]
MODERN_ONLY = [
    "append app a => ok",
    "append app b => ok",
    "get app => ab",
    "multi_set m1 m2 => ok",
    "multi_get m1 m2 => x,y",
]


@unittest.skipUnless(HAVE_TORCH, "torch.distributed is not importable")
class ClientInteropTest(unittest.TestCase):
    def setUp(self):
        self.protocol = torch_protocol()
        if self.protocol is None:
            self.skipTest(f"torch {torch.__version__}: 2.1's wire table is unverified")
        self.assertTrue(os.access(PROBE, os.X_OK), f"no probe at {PROBE}")
        # Port 0: the OS picks, no race with other tests; no world size, so
        # no "init/" key and num_keys counts only the probe's keys.
        self.server = dist.TCPStore("127.0.0.1", 0, None, True, datetime.timedelta(seconds=30),
                                    wait_for_workers=False)

    def tearDown(self):
        self.server = None  # the last reference: torch stops its server thread

    def run_probe(self, protocol=None):
        p = subprocess.run([PROBE, "127.0.0.1", str(self.server.port), protocol or self.protocol],
                           capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout.splitlines(), p.stderr

    def test_probe_script_against_torch_server(self):
        rc, lines, err = self.run_probe()
        expected = COMMON + (MODERN_ONLY if self.protocol == "modern" else [])
        self.assertEqual(lines, expected, err)
        self.assertEqual(rc, 0, err)

    def test_torch_client_sees_the_probe_keys(self):
        rc, lines, err = self.run_probe()
        self.assertEqual(rc, 0, "\n".join(lines) + err)
        # A separate torch client, as a worker would connect; keys without the
        # "/" that both clients add on the wire.
        client = dist.TCPStore("127.0.0.1", self.server.port, None, False,
                               datetime.timedelta(seconds=10), wait_for_workers=False)
        self.assertEqual(client.get("cnt"), b"7")
        self.assertEqual(client.get("cas"), b"second")
        self.assertEqual(client.get("from_probe"), b"hello")
        self.assertFalse(client.delete_key("k1"))  # the probe deleted it
        self.assertEqual(client.add("cnt", 1), 8)
        expected_keys = 3 if self.protocol == "legacy" else 6  # + /app /m1 /m2
        self.assertEqual(client.num_keys(), expected_keys)

    def test_modern_handshake_to_old_torch_fails_fast_and_says_why(self):
        if self.protocol != "legacy":
            self.skipTest("torch's server speaks the modern protocol")
        start = time.monotonic()
        rc, lines, err = self.run_probe("modern")
        self.assertLess(time.monotonic() - start, 5.0)
        self.assertEqual(rc, 1)
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("connect => error:", lines[0])
        self.assertIn("needs the legacy protocol", lines[0])
        # The server shrugged it off: a legacy client still works.
        rc, lines, err = self.run_probe()
        self.assertEqual(rc, 0, "\n".join(lines) + err)


if __name__ == "__main__":
    unittest.main()
