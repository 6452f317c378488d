"""cxxrun-rdzv under hostile clients: the server-wide memory budget, the value limit, and where it
listens (docs/store-protocol.md §5, README "cxxrun-rdzv").

Every wait here has a deadline, and each test kills only the server it started.
"""
import ipaddress
import socket
import struct
import subprocess
import threading
import time
import unittest

from test_store_interop import RDZV, RdzvServer, recv_exact

MIB = 1 << 20
VALIDATE = b"\x00" + struct.pack("<I", 0x3C85F7CE)


def rss_kib(pid, field="VmRSS"):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field} for pid {pid}")


def stalled_multi_set(value_bytes, values=7):
    """A modern MULTI_SET announcing `values` values of `value_bytes` each: VALIDATE, the opcode,
    the count, the first key and the first value's length; the value itself follows separately."""
    return VALIDATE + b"\x0b" + struct.pack("<Q", values) + struct.pack("<Q", 2) + b"/k" + \
        struct.pack("<Q", value_bytes)


def legacy_add(key, delta):
    return b"\x03" + struct.pack("<Q", len(key)) + key + struct.pack("<q", delta)


def answers(port):
    """Whether a fresh legacy client gets its ADD answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as c:
        c.sendall(legacy_add(b"/alive", 1))
        return len(recv_exact(c, 8)) == 8


def send_until_closed(sock, data):
    """Sends `data`; False when the server closed the connection first."""
    try:
        sock.sendall(data)
        return True
    except (BrokenPipeError, ConnectionResetError, socket.timeout):
        return False


class MemoryBudgetTest(unittest.TestCase):
    def test_stalled_requests_stay_within_the_memory_limit(self):
        limit_mib = 64
        server = RdzvServer("--port", "0", "--memory-limit", str(limit_mib))
        self.addCleanup(server.kill)
        pid = server.proc.pid
        idle_kib = rss_kib(pid)
        peak = [idle_kib]
        stop = threading.Event()

        def sample():
            while not stop.is_set():
                try:
                    peak[0] = max(peak[0], rss_kib(pid))
                except (OSError, AssertionError):
                    return
                time.sleep(0.01)

        sampler = threading.Thread(target=sample)
        sampler.start()
        socks = []
        try:
            # 30 clients each announce a 56 MiB MULTI_SET (7 values of 8 MiB) and send 6 MiB of it:
            # 180 MiB offered, more than twice the budget, none of it a whole request.
            chunk = b"x" * (6 * MIB)
            still_open = 0
            for _ in range(30):
                s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                socks.append(s)
                s.sendall(stalled_multi_set(8 * MIB))
                still_open += send_until_closed(s, chunk)
            time.sleep(0.5)  # let the server read what the last ones sent
            self.assertTrue(answers(server.port), "the server answers a normal client")
        finally:
            stop.set()
            sampler.join(10)
            for s in socks:
                s.close()
        hwm_kib = rss_kib(pid, "VmHWM")
        code, err = server.stop()
        self.assertEqual(code, 0, err)
        limit_kib = limit_mib * 1024
        # The budget bounds what the server holds for its clients; its own idle footprint (a few
        # MiB) comes on top.
        self.assertLess(max(peak[0], hwm_kib), limit_kib + idle_kib,
                        f"peak RSS {max(peak[0], hwm_kib)} KiB, idle {idle_kib} KiB, limit {limit_kib} KiB")
        closes = [l for l in err.splitlines() if "memory limit" in l]
        self.assertGreater(len(closes), 0, err)
        # One line per close, naming the peer, what it held and the cap.
        for line in closes:
            self.assertRegex(line, r"closing connection from 127\.0\.0\.1:\d+: ")
            self.assertRegex(line, r"holds \d+ bytes")
            self.assertIn(str(limit_mib * MIB), line)

    def test_an_announced_request_reserves_nothing_it_has_not_received(self):
        # 40 clients each announce 56 MiB (here a single SET value, with --max-value-bytes raised)
        # and send 4 KiB: 2.2 GiB announced, 160 KiB received. Nobody is closed, and a client whose
        # request then arrives whole is answered.
        server = RdzvServer("--port", "0", "--memory-limit", "8", "--max-value-bytes", str(56 * MIB))
        self.addCleanup(server.kill)
        socks = []
        try:
            for _ in range(40):
                s = socket.create_connection(("127.0.0.1", server.port), timeout=10)
                socks.append(s)
                s.sendall(b"\x00" + struct.pack("<Q", 2) + b"/k" + struct.pack("<Q", 56 * MIB) + b"y" * 4096)
            self.assertTrue(answers(server.port))
            time.sleep(0.3)
            for s in socks:
                s.setblocking(False)
                try:
                    self.assertNotEqual(s.recv(1), b"", "a stalled client was closed")
                except BlockingIOError:
                    pass  # still open, nothing to read: as it should be
        finally:
            for s in socks:
                s.close()
        self.assertLess(rss_kib(server.proc.pid), 64 * 1024)
        code, err = server.stop()
        self.assertEqual(code, 0, err)
        self.assertNotIn("memory limit", err)


class ValueLimitTest(unittest.TestCase):
    def set_value(self, port, size):
        """A legacy SET of a `size`-byte value, then GETNUMKEYS on the same connection; returns the
        key count, or None when the server closed the connection."""
        with socket.create_connection(("127.0.0.1", port), timeout=20) as c:
            request = b"\x00" + struct.pack("<Q", 2) + b"/v" + struct.pack("<Q", size)
            if not send_until_closed(c, request + b"v" * size + b"\x06"):
                return None
            try:
                return struct.unpack("<q", recv_exact(c, 8))[0]
            except (AssertionError, ConnectionResetError):
                return None

    def test_default_is_8_mib(self):
        server = RdzvServer("--port", "0")
        self.addCleanup(server.kill)
        self.assertEqual(self.set_value(server.port, 8 * MIB), 1)
        self.assertIsNone(self.set_value(server.port, 8 * MIB + 1))
        code, err = server.stop()
        self.assertIn(f"value of {8 * MIB + 1} bytes exceeds the limit of {8 * MIB} bytes", err)

    def test_max_value_bytes_raises_it(self):
        server = RdzvServer("--port", "0", "--max-value-bytes", str(16 * MIB))
        self.addCleanup(server.kill)
        self.assertEqual(self.set_value(server.port, 12 * MIB), 1)
        self.assertIsNone(self.set_value(server.port, 16 * MIB + 1))
        code, err = server.stop()
        self.assertEqual(code, 0, err)
        line, = [l for l in err.splitlines() if "closing connection" in l]
        self.assertRegex(line, rf"from 127\.0\.0\.1:\d+: SET: value of {16 * MIB + 1} bytes exceeds "
                               rf"the limit of {16 * MIB} bytes")

    def test_bad_limits_are_usage_errors(self):
        for args in (["--memory-limit", "0"], ["--memory-limit", "x"], ["--max-value-bytes", "0"],
                     ["--max-value-bytes", str(64 * MIB + 1)]):
            p = subprocess.run([RDZV, "--port", "0", *args], capture_output=True, text=True, timeout=30,
                               stdin=subprocess.DEVNULL)
            self.assertEqual(p.returncode, 2, (args, p.stderr))
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertTrue(p.stderr.startswith("cxxrun-rdzv: error: "), p.stderr)


def listening_sockets(port):
    """(family, address) of every socket listening on `port`, from /proc/net/tcp and tcp6."""
    found = []
    for family, path in (("ipv4", "/proc/net/tcp"), ("ipv6", "/proc/net/tcp6")):
        try:
            with open(path) as f:
                rows = f.read().splitlines()[1:]
        except FileNotFoundError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            address, port_hex = local.split(":")
            if state != "0A" or int(port_hex, 16) != port:
                continue
            raw = bytes.fromhex(address)
            if family == "ipv4":
                found.append((family, str(ipaddress.IPv4Address(raw[::-1]))))
            else:  # four little-endian 32-bit words
                words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                found.append((family, str(ipaddress.IPv6Address(words))))
    return found


def non_loopback_address():
    """An IPv4 address of this host other than loopback, or None (no route needed: UDP connect
    sends nothing)."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1
            address = s.getsockname()[0]
    except OSError:
        return None
    return None if address.startswith("127.") else address


class ListenAddressTest(unittest.TestCase):
    def test_loopback_unless_host_is_given(self):
        server = RdzvServer("--port", "0")
        self.addCleanup(server.kill)
        self.assertRegex(server.first_line.strip(), rf"listening on 127\.0\.0\.1:{server.port}$")
        self.assertEqual(listening_sockets(server.port), [("ipv4", "127.0.0.1")])
        other = non_loopback_address()
        if other is not None:
            with self.assertRaises(ConnectionRefusedError):
                socket.create_connection((other, server.port), timeout=5).close()
        self.assertTrue(answers(server.port))
        code, err = server.stop()
        self.assertEqual(code, 0, err)
        self.assertNotIn("without a token", err)

    def test_host_all_interfaces(self):
        server = RdzvServer("--port", "0", "--host", "0.0.0.0")
        self.addCleanup(server.kill)
        self.assertRegex(server.first_line.strip(), rf"listening on 0\.0\.0\.0:{server.port}$")
        self.assertEqual(listening_sockets(server.port), [("ipv4", "0.0.0.0")])
        other = non_loopback_address()
        if other is not None:
            socket.create_connection((other, server.port), timeout=5).close()
        code, err = server.stop()
        self.assertEqual(code, 0, err)


if __name__ == "__main__":
    unittest.main()
