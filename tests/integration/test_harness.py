"""The test harness's own promises, where breaking one fails other tests by chance."""
import socket
import unittest

from harness import free_port


class FreePort(unittest.TestCase):
    def test_never_the_same_port_twice_in_one_process(self):
        # 2,000 random picks from 12,000 ports repeat about 160 times when
        # nothing prevents it; an etcd cluster's six repeated one in CI.
        ports = [free_port() for _ in range(2000)]
        self.assertEqual(len(ports), len(set(ports)))

    def test_the_port_is_free_and_below_the_ephemeral_range(self):
        port = free_port()
        self.assertTrue(20000 <= port < 32000, port)
        with socket.socket() as s:
            s.bind(("127.0.0.1", port))


if __name__ == "__main__":
    unittest.main()
