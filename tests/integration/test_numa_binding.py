"""--numa-binding on the real binary: each worker must run with the CPUs
(and, in node mode, the memory policy) its plan gives it, by exec and when
forked from the forkserver, and a host it cannot bind on is refused in one
line with exit 2.

No GPU machine is needed: hwloc reads HWLOC_XMLFILE instead of the host,
and tests/data/numa-1node-2cpu-2gpu.xml describes a host whose CPUs exist
here (one NUMA node, CPUs 0 and 1 on two cores, two GPUs), so the bindings
it plans can really be taken.
"""
import os
import re
import unittest

from harness import FORKED, TORCH_PYTHON, TempDirTest, clean_env, run

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data")
TWO_CPUS = os.path.join(DATA, "numa-1node-2cpu-2gpu.xml")
NO_GPU = os.path.join(DATA, "numa-no-gpu.xml")

# What a worker reports: its CPUs, a new thread's, its first mapping's
# memory policy (numa_maps: "bind:0" under MPOL_BIND, "default" otherwise),
# and whether it was forked from the forkserver (it keeps the zygote's
# command line).
PY_WORKER = r'''
import os, threading
rank = os.environ["LOCAL_RANK"]
print(f"cpus {rank} {sorted(os.sched_getaffinity(0))}", flush=True)
t = threading.Thread(target=lambda: print(f"thread {rank} {sorted(os.sched_getaffinity(0))}", flush=True))
t.start(); t.join()
with open("/proc/self/numa_maps") as f:
    print(f"policy {rank} {f.readline().split()[1]}", flush=True)
forked = ''' + FORKED + r'''
print(f"forked {rank} {forked}", flush=True)
'''

SH_WORKER = ("grep Cpus_allowed_list /proc/self/status; "
             "echo policy $LOCAL_RANK $(head -n1 /proc/self/numa_maps | cut -d' ' -f2)")


def host_has_nvidia_gpu():
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus")) > 0
    except OSError:
        return False


def env_without_hwloc(**extra):
    env = clean_env(**extra)
    for name in ("HWLOC_XMLFILE", "HWLOC_FSROOT", "HWLOC_SYNTHETIC", "CUDA_VISIBLE_DEVICES"):
        if name not in extra:
            env.pop(name, None)
    return env


@unittest.skipUnless({0, 1} <= os.sched_getaffinity(0), "needs CPUs 0 and 1 in this process's affinity")
class NumaBinding(TempDirTest):
    def launch(self, mode, program, *, start_method="spawn", nproc=2):
        env = env_without_hwloc(HWLOC_XMLFILE=TWO_CPUS, PYTHON_EXEC=TORCH_PYTHON)
        return run(["--standalone", f"--nproc-per-node={nproc}", f"--numa-binding={mode}",
                    f"--start-method={start_method}", *program], env=env)

    def test_exclusive_gives_each_exec_worker_its_own_core(self):
        rc, out, err = self.launch("exclusive", ["--no-python", "sh", "-c", SH_WORKER])
        self.assertEqual(rc, 0, err)
        self.assertIn("[default0]:Cpus_allowed_list:\t0\n", out)
        self.assertIn("[default1]:Cpus_allowed_list:\t1\n", out)
        self.assertIn("[default0]:policy 0 default\n", out)  # memory stays unbound
        self.assertIn("local rank 0: bound to CPUs 0 (NUMA node 0, near GPU 0, 0000:18:00.0)", err)
        self.assertIn("local rank 1: bound to CPUs 1 (NUMA node 0, near GPU 1, 0000:2a:00.0)", err)

    def test_node_binds_cpus_and_memory_of_an_exec_worker(self):
        rc, out, err = self.launch("node", ["--no-python", "sh", "-c", SH_WORKER])
        self.assertEqual(rc, 0, err)
        for rank in (0, 1):
            self.assertIn(f"[default{rank}]:Cpus_allowed_list:\t0-1\n", out)
            self.assertIn(f"[default{rank}]:policy {rank} bind:0\n", out)
            self.assertIn(f"local rank {rank}: bound to CPUs 0-1 and memory of NUMA node 0 (near GPU {rank}, ", err)

    def forked(self, mode):
        script = os.path.join(self.dir, "worker.py")
        with open(script, "w") as f:
            f.write(PY_WORKER)
        rc, out, err = self.launch(mode, [script], start_method="forkserver")
        self.assertEqual(rc, 0, err)
        self.assertNotIn("by exec", err)
        for rank in (0, 1):
            self.assertIn(f"[default{rank}]:forked {rank} True\n", out)
        return out

    def test_exclusive_binds_a_worker_forked_from_the_forkserver(self):
        out = self.forked("exclusive")
        for rank in (0, 1):
            self.assertIn(f"[default{rank}]:cpus {rank} [{rank}]\n", out)
            self.assertIn(f"[default{rank}]:thread {rank} [{rank}]\n", out)
            self.assertIn(f"[default{rank}]:policy {rank} default\n", out)

    def test_node_binds_the_memory_of_a_worker_forked_from_the_forkserver(self):
        out = self.forked("node")
        for rank in (0, 1):
            self.assertIn(f"[default{rank}]:cpus {rank} [0, 1]\n", out)
            self.assertIn(f"[default{rank}]:policy {rank} bind:0\n", out)

    def test_more_workers_than_gpus_is_refused(self):
        rc, out, err = self.launch("socket", ["--no-python", "true"], nproc=3)
        self.assertEqual(rc, 2, err)
        self.assertEqual(err.strip().splitlines(),
                         ["cxxrun: error: --numa-binding=socket: 3 local workers need 3 GPUs to bind near, one each, "
                          "and this host has 2"])


class NumaBindingRefused(unittest.TestCase):
    def assert_refused(self, env, line):
        rc, out, err = run(["--standalone", "--numa-binding=node", "--no-python", "true"], env=env)
        self.assertEqual(rc, 2, err)
        self.assertEqual(err.strip().splitlines(), [line])
        self.assertNotIn("Traceback", err)

    @unittest.skipIf(host_has_nvidia_gpu(), "this host has an NVIDIA GPU")
    def test_a_host_without_gpus(self):
        self.assert_refused(env_without_hwloc(),
                            "cxxrun: error: --numa-binding=node: this host has no NVIDIA GPU to bind near")

    def test_a_topology_without_nvidia_gpus(self):
        self.assert_refused(env_without_hwloc(HWLOC_XMLFILE=NO_GPU),
                            "cxxrun: error: --numa-binding=node: this host has no NVIDIA GPU to bind near")

    def test_gpu_uuids(self):
        rc, _, err = run(["--standalone", "--numa-binding=node", "--no-python", "true"],
                         env=env_without_hwloc(HWLOC_XMLFILE=TWO_CPUS, CUDA_VISIBLE_DEVICES="GPU-5a1b"))
        self.assertEqual(rc, 2, err)
        self.assertRegex(err, re.compile(r"^cxxrun: error: --numa-binding=node: CUDA_VISIBLE_DEVICES=GPU-5a1b: "
                                         r".*name the GPUs by index", re.M))


if __name__ == "__main__":
    unittest.main()
