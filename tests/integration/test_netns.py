"""Two hosts in network namespaces joined by a veth pair: each agent binds its
own IP, and MASTER_ADDR is the address rank 0's node uses to reach the store.

Traffic stays inside the namespaces this test creates (10.213.7.0/24).
"""
import os
import shutil
import subprocess
import unittest
import uuid

from harness import CXXRUN, TempDirTest, clean_env

SUBNET = "10.213.7"


def sh(*args):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=30)


def can_make_namespaces():
    if os.geteuid() != 0 or not shutil.which("ip"):
        return False
    probe = f"cxxrun_probe_{os.getpid()}"
    if sh("ip", "netns", "add", probe).returncode != 0:
        return False
    sh("ip", "netns", "del", probe)
    return True


@unittest.skipUnless(can_make_namespaces(), "needs root and ip netns")
class TwoHosts(TempDirTest):
    def setUp(self):
        super().setUp()
        tag = uuid.uuid4().hex[:6]
        self.ns = [f"cxr{tag}a", f"cxr{tag}b"]
        self.ips = [f"{SUBNET}.1", f"{SUBNET}.2"]
        for ns in self.ns:
            self.assertEqual(sh("ip", "netns", "add", ns).returncode, 0)
        veth = [f"v{tag}a", f"v{tag}b"]
        r = sh("ip", "link", "add", veth[0], "netns", self.ns[0], "type", "veth", "peer", "name", veth[1],
               "netns", self.ns[1])
        self.assertEqual(r.returncode, 0, r.stderr)
        for ns, dev, ip in zip(self.ns, veth, self.ips):
            for cmd in (["ip", "addr", "add", f"{ip}/24", "dev", dev], ["ip", "link", "set", dev, "up"],
                        ["ip", "link", "set", "lo", "up"]):
                r = sh("ip", "netns", "exec", ns, *cmd)
                self.assertEqual(r.returncode, 0, r.stderr)

    def tearDown(self):
        for ns in self.ns:
            sh("ip", "netns", "del", ns)
        super().tearDown()

    def test_agents_on_two_hosts_form_one_job(self):
        dump = self.script("dump.sh", f'env -0 > {self.dir}/env.$RANK\n')
        run_id = uuid.uuid4().hex
        argv = ["--rdzv-backend=c10d", f"--rdzv-endpoint={self.ips[0]}:29400", f"--rdzv-id={run_id}",
                "--nnodes=2", "--nproc-per-node=2", dump]
        procs = [subprocess.Popen(["ip", "netns", "exec", ns, CXXRUN] + argv, env=clean_env(),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for ns in self.ns]
        for p in procs:
            try:
                out, err = p.communicate(timeout=60)
            finally:
                p.kill()
            self.assertEqual(p.returncode, 0, err)
        envs = []
        for r in range(4):
            with open(f"{self.dir}/env.{r}") as f:
                envs.append(dict(kv.split("=", 1) for kv in f.read().split("\0") if kv))
        self.assertEqual({e["WORLD_SIZE"] for e in envs}, {"4"})
        master = {e["MASTER_ADDR"] for e in envs}
        self.assertEqual(len(master), 1)
        # Rank 0 is the node with the lower address; it reached the store from it.
        self.assertEqual(master, {self.ips[0]})
        self.assertEqual(len({e["MASTER_PORT"] for e in envs}), 1)
