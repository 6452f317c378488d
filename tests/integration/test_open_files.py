"""The workers' store the agent serves holds a connection per rank: an agent
started with the soft RLIMIT_NOFILE most systems give (1024; 256 here)
raises its own to the hard limit, so every rank gets in, and its workers
still see the limit the agent was started with (agent/process/open_files.h)."""
import os
import resource
import subprocess

from harness import CXXRUN, TempDirTest, clean_env, free_port

# Each worker opens this many connections to MASTER_ADDR:MASTER_PORT, does a
# SET and a GET on each (as init_process_group's store client does), and
# holds them all until every reply came: 4 x 100 > 256.
WORKER = r'''
import os, resource, socket, struct, sys, time
soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
print("soft limit", soft, flush=True)
addr = (os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]))
rank = os.environ["RANK"]
held = []
deadline = time.monotonic() + 15
for i in range(100):
    s = socket.create_connection(addr, timeout=max(0.1, deadline - time.monotonic()))
    key = f"/open-files/{rank}/{i}".encode()
    value = b"v" * 8
    s.sendall(b"\x00" + struct.pack("<I", 0x3C85F7CE)
              + b"\x01" + struct.pack("<Q", len(key)) + key + struct.pack("<Q", len(value)) + value
              + b"\x03" + struct.pack("<Q", len(key)) + key)
    got = b""
    while len(got) < 8 + len(value):
        s.settimeout(max(0.1, deadline - time.monotonic()))
        chunk = s.recv(64)
        if not chunk:
            sys.exit(f"connection {i}: the store closed it")
        got += chunk
    held.append(s)
print("all 100 answered", flush=True)
'''


class OpenFiles(TempDirTest):
    def test_every_rank_connects_though_the_agent_started_with_a_low_soft_limit(self):
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        if hard != resource.RLIM_INFINITY and hard < 2048:
            self.skipTest(f"the hard RLIMIT_NOFILE here is {hard}")
        worker = os.path.join(self.dir, "w.py")
        with open(worker, "w") as f:
            f.write(WORKER)
        # c10d on this host: the agent serves the workers' store.
        args = [CXXRUN, "--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{free_port()}", "--nnodes=1",
                "--nproc-per-node=4", "--tee=3", worker]
        p = subprocess.run(args, env=clean_env(), capture_output=True, text=True, timeout=60,
                           stdin=subprocess.DEVNULL,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard)))
        self.assertEqual(p.returncode, 0, p.stderr[-3000:])
        self.assertEqual(p.stdout.count("all 100 answered"), 4, p.stdout)
        # The workers see the soft limit the agent was started with.
        self.assertEqual(p.stdout.count("soft limit 256"), 4, p.stdout)
