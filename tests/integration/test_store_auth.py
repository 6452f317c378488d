"""The rendezvous store's shared secret (docs/store-protocol.md §9): agents with
--rdzv-conf token_file, cxxrun-rdzv --token-file, and torch's own client against a protected store.

Every wait here has a deadline, and each test kills only the processes it started.
"""
import json
import os
import socket
import subprocess
import time
import unittest
import uuid

from harness import TORCH_PYTHON, TempDirTest, clean_env, finish_all, free_port, run, start
from test_store_interop import RDZV, RdzvServer, torch_available
from test_store_limits import non_loopback_address

# Runs inside TORCH_PYTHON with the store's port as argv[1]: what torch's client saw.
TORCH_CLIENT = r"""
import json, sys
from datetime import timedelta
import torch.distributed as dist
out = {"error": None}
try:
    s = dist.TCPStore("127.0.0.1", int(sys.argv[1]), is_master=False, timeout=timedelta(seconds=5))
    s.set("key", "value")
    out["add"] = s.add("counter", 1)
except RuntimeError as e:
    out["error"] = str(e)
print(json.dumps(out))
"""


def read(path):
    with open(path) as f:
        return f.read()


class TokenTest(TempDirTest):
    def token_file(self, name, content):
        path = os.path.join(self.dir, name)
        with open(path, "w") as f:
            f.write(content)
        os.chmod(path, 0o600)
        return path

    def agent_args(self, port, run_id, conf):
        worker = self.script("dump.sh", f"echo $RANK > {self.dir}/rank.$RANK\n")
        return ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={run_id}",
                "--nnodes=2", "--nproc-per-node=1", f"--rdzv-conf={conf}", worker]

    def ranks(self):
        return sorted(int(n.split(".")[1]) for n in os.listdir(self.dir) if n.startswith("rank."))

    def test_agents_with_the_right_token_form_a_job(self):
        port, run_id = free_port(), uuid.uuid4().hex[:12]
        conf = "token_file=" + self.token_file("token", "right\n")
        procs = [start(self.agent_args(port, run_id, conf)) for _ in range(2)]
        results = finish_all(self, procs, 60)
        for rc, _, err in results:
            self.assertEqual(rc, 0, err)
            self.assertNotIn("no token", err)
            self.assertNotIn("closing connection", err)  # nobody was refused
        self.assertEqual(self.ranks(), [0, 1])

    def test_wrong_token_exits_at_once_naming_authentication(self):
        server = RdzvServer("--port", "0", "--token-file", self.token_file("right", "right"))
        self.addCleanup(server.kill)
        conf = "is_host=false,join_timeout=60,token_file=" + self.token_file("wrong", "wrong")
        started = time.monotonic()
        rc, _, err = run(self.agent_args(server.port, "wrong_token", conf), timeout=60)
        elapsed = time.monotonic() - started
        self.assertEqual(rc, 1, err)
        self.assertLess(elapsed, 20, "failed at once, not after join_timeout")
        named = [line for line in err.splitlines() if "authentication" in line]
        self.assertEqual(len(named), 1, err)
        self.assertTrue(named[0].startswith("cxxrun: "), err)
        self.assertIn("the store refused this client's token", named[0])
        self.assertIn(f"127.0.0.1:{server.port}", named[0])
        self.assertEqual(self.ranks(), [])
        code, server_err = server.stop()
        self.assertEqual(code, 0, server_err)
        self.assertRegex(server_err, r"closing connection from 127\.0\.0\.1:\d+: authentication failed: wrong token")

    def test_an_agent_without_the_token_is_refused(self):
        server = RdzvServer("--port", "0", "--token-file", self.token_file("right", "right"))
        self.addCleanup(server.kill)
        # After three refused handshakes, not at join_timeout (it was 600 s of
        # reconnecting, 90 a second, and a warning in the store's log each).
        started = time.monotonic()
        rc, _, err = run(self.agent_args(server.port, "no_token", "is_host=false,join_timeout=60"), timeout=90)
        self.assertEqual(rc, 1, err)
        self.assertLess(time.monotonic() - started, 20, "failed at once, not after join_timeout")
        self.assertIn("a store with a token refuses clients without it", err)
        self.assertIn("--rdzv-conf token_file", err)
        code, server_err = server.stop()
        self.assertIn("not authenticated", server_err)
        self.assertLessEqual(server_err.count("not authenticated"), 3, server_err)

    def test_a_flood_of_refusals_is_not_a_flood_of_log_lines(self):
        # 40 connections without the token: ten lines, then one that counts
        # the rest (each was a warning: 2,831 lines in 30 s of one agent).
        server = RdzvServer("--port", "0", "--token-file", self.token_file("right", "right"))
        self.addCleanup(server.kill)
        for _ in range(40):
            with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
                s.sendall(b"\x03garbage")
                s.settimeout(5)
                self.assertEqual(s.recv(16), b"")  # closed, nothing answered
        code, err = server.stop()
        self.assertEqual(code, 0, err)
        self.assertEqual(err.count("closing connection from"), 10, err)
        self.assertIn("30 more connections refused in the last 10 s, not each logged", err)

    def test_torch_client_is_refused(self):
        if not torch_available():
            self.skipTest(f"torch is not importable by {TORCH_PYTHON}")
        server = RdzvServer("--port", "0", "--token-file", self.token_file("right", "right"))
        self.addCleanup(server.kill)
        p = subprocess.run([TORCH_PYTHON, "-c", TORCH_CLIENT, str(server.port)], capture_output=True, text=True,
                           timeout=120, env=clean_env())
        self.assertEqual(p.returncode, 0, p.stderr)
        out = json.loads(p.stdout.strip().splitlines()[-1])
        self.assertIsNotNone(out["error"], out)
        self.assertNotIn("add", out)
        code, server_err = server.stop()
        self.assertEqual(code, 0, server_err)
        self.assertRegex(server_err, r"closing connection from 127\.0\.0\.1:\d+: not authenticated: the store "
                                     r"requires a token")

    def test_token_file_errors_are_usage_errors(self):
        empty = self.token_file("empty", "\n")
        for path, why in (("/nonexistent/token", "No such file or directory"), (empty, "is empty")):
            p = subprocess.run([RDZV, "--port", "0", "--token-file", path], capture_output=True, text=True,
                               timeout=30, stdin=subprocess.DEVNULL)
            self.assertEqual(p.returncode, 2, p.stderr)
            self.assertEqual(len(p.stderr.strip().splitlines()), 1, p.stderr)
            self.assertTrue(p.stderr.startswith("cxxrun-rdzv: error: --token-file: "), p.stderr)
            self.assertIn(why, p.stderr)

            rc, _, err = run(self.agent_args(free_port(), "bad_token_file", "token_file=" + path), timeout=30)
            self.assertEqual(rc, 2, err)
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertTrue(err.startswith(f"cxxrun: error: --rdzv-conf token_file={path}: "), err)
            self.assertIn(why, err)

    def test_no_token_beyond_loopback_is_warned_once(self):
        for args, warned in ((["--host", "0.0.0.0"], 1), ([], 0),
                             (["--host", "0.0.0.0", "--token-file", self.token_file("t", "t")], 0)):
            log = os.path.join(self.dir, "rdzv.log")
            with open(log, "w") as stderr:
                server = subprocess.Popen([RDZV, "--port", "0", *args], stdin=subprocess.DEVNULL,
                                          stdout=subprocess.DEVNULL, stderr=stderr)
            try:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline and "listening on" not in read(log):
                    time.sleep(0.02)
            finally:
                server.terminate()
                server.wait(timeout=10)
            self.assertEqual(server.returncode, 0)
            err = read(log)
            self.assertIn("listening on", err)
            self.assertEqual(err.count("no token on a store that listens beyond loopback"), warned, (args, err))
    def test_an_agent_hosting_beyond_loopback_without_a_token_warns_once(self):
        address = non_loopback_address()
        if address is None:
            self.skipTest("this host has no address but loopback")
        worker = self.script("ok.sh", "exit 0\n")
        for conf, warned in (("", 1), ("token_file=" + self.token_file("t", "t"), 0)):
            args = ["--rdzv-backend=c10d", f"--rdzv-endpoint={address}:{free_port()}", "--rdzv-id=warn",
                    "--nnodes=1", "--nproc-per-node=1"] + ([f"--rdzv-conf={conf}"] if conf else []) + [worker]
            rc, _, err = run(args, timeout=60)
            self.assertEqual(rc, 0, err)
            self.assertEqual(err.count("no token on the rendezvous store"), warned, err)


if __name__ == "__main__":
    unittest.main()
