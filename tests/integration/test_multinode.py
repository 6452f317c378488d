"""Several agents on loopback form one job: c10d rendezvous and static backend."""
import os
import socket
import subprocess
import time
import uuid

from harness import CXXRUN, RDZV_SERVER, TempDirTest, clean_env, finish_all, free_port, run, start, wait_for




class MultiNode(TempDirTest):
    def dump_script(self):
        return self.script("dump.sh", f'env -0 > {self.dir}/env.$RANK.$$\n')

    def envs(self):
        out = []
        for name in sorted(os.listdir(self.dir)):
            if name.startswith("env."):
                with open(os.path.join(self.dir, name)) as f:
                    out.append(dict(kv.split("=", 1) for kv in f.read().split("\0") if kv))
        return out

    def run_agents(self, argv_per_agent, delays=None, timeout=60):
        procs = []
        for i, argv in enumerate(argv_per_agent):
            if delays:
                time.sleep(delays[i])
            procs.append(start(argv))
        return finish_all(self, procs, timeout)

    def check_one_job(self, nodes, nproc):
        envs = self.envs()
        world = nodes * nproc
        self.assertEqual(sorted(int(e["RANK"]) for e in envs), list(range(world)))
        for key, value in (("WORLD_SIZE", world), ("GROUP_WORLD_SIZE", nodes), ("LOCAL_WORLD_SIZE", nproc)):
            self.assertEqual({e[key] for e in envs}, {str(value)}, key)
        self.assertEqual(len({(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs}), 1)
        self.assertEqual(sorted({int(e["GROUP_RANK"]) for e in envs}), list(range(nodes)))
        for e in envs:
            self.assertEqual(int(e["RANK"]), int(e["GROUP_RANK"]) * nproc + int(e["LOCAL_RANK"]))
        socket.inet_aton(envs[0]["MASTER_ADDR"])  # an IP address, never a host name
        return envs

    def c10d_args(self, port, nnodes, run_id, conf="", extra=()):
        args = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}", f"--rdzv-id={run_id}",
                f"--nnodes={nnodes}", "--nproc-per-node=2"]
        if conf:
            args.append(f"--rdzv-conf={conf}")
        return args + list(extra) + [self.dump_script()]

    def test_four_agents_form_one_job(self):
        port, run_id = free_port(), uuid.uuid4().hex
        results = self.run_agents([self.c10d_args(port, 4, run_id) for _ in range(4)])
        for rc, out, err in results:
            self.assertEqual(rc, 0, err)
        envs = self.check_one_job(4, 2)
        self.assertEqual({e["TORCHELASTIC_RUN_ID"] for e in envs}, {run_id})

    def test_slurm_step_variables_alone_form_one_job(self):
        # What srun -N3 --ntasks-per-node=1 sets in each task, with no
        # rendezvous flag given: every agent derives the same job.
        port, dump = free_port(), self.dump_script()  # written once: agents read it while others start
        procs = []
        for node in range(3):
            env = clean_env(SLURM_JOB_ID="77", SLURM_STEP_ID="3", SLURM_STEP_NUM_NODES="3", SLURM_NODEID=str(node),
                            SLURM_STEP_NODELIST="localhost,localhost,localhost", SLURM_STEP_NUM_TASKS="3",
                            SLURM_GPUS_ON_NODE="2")
            procs.append(start([f"--rdzv-endpoint=:{port}", dump], env=env))
        for rc, out, err in finish_all(self, procs, 60):
            self.assertEqual(rc, 0, err)
            self.assertIn("Slurm job 77 step 3: node", err)
        envs = self.check_one_job(3, 2)
        self.assertEqual({e["TORCHELASTIC_RUN_ID"] for e in envs}, {"slurm-77.3"})
        self.assertIn("SIGUSR1", envs[0]["TORCHELASTIC_SIGNALS_TO_HANDLE"])

    def test_elastic_range_takes_late_joiners(self):
        port, run_id = free_port(), uuid.uuid4().hex
        argv = self.c10d_args(port, "2:4", run_id, conf="last_call_timeout=3")
        results = self.run_agents([argv, argv, argv], delays=[0, 0, 0.5])
        for rc, out, err in results:
            self.assertEqual(rc, 0, err)
        self.check_one_job(3, 2)

    def test_standalone_rendezvous_server(self):
        port, run_id = free_port(), uuid.uuid4().hex
        server = subprocess.Popen([RDZV_SERVER, f"--port={port}"], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
        try:
            argv = self.c10d_args(port, 2, run_id, conf="is_host=false")
            results = self.run_agents([argv, argv])
            for rc, out, err in results:
                self.assertEqual(rc, 0, err)
            self.check_one_job(2, 2)
            self.assertIsNone(server.poll(), "the rendezvous server outlives the job")
        finally:
            server.terminate()
            server.communicate(timeout=10)

    def test_static_backend_two_nodes(self):
        port = free_port()
        common = ["--nnodes=2", "--nproc-per-node=2", "--master-addr=127.0.0.1", f"--master-port={port}",
                  "--rdzv-id=static1"]
        results = self.run_agents([common + [f"--node-rank={r}", self.dump_script()] for r in (1, 0)])
        for rc, out, err in results:
            self.assertEqual(rc, 0, err)
        envs = self.check_one_job(2, 2)
        self.assertEqual({e["MASTER_PORT"] for e in envs}, {str(port)})
        self.assertEqual({e["TORCHELASTIC_USE_AGENT_STORE"] for e in envs}, {"True"})

    def test_unreachable_endpoint_gives_up_at_join_timeout(self):
        port = free_port()
        rc, out, err = run(self.c10d_args(port, 2, "lonely", conf="is_host=false,join_timeout=2")[:-1]
                           + [self.dump_script()], timeout=60)
        self.assertEqual(rc, 1, err)
        self.assertIn(f"127.0.0.1:{port}", err)
        self.assertIn("lonely", err)
        self.assertEqual(self.envs(), [])

    def test_join_timeout_reports_progress(self):
        port = free_port()
        rc, out, err = run(self.c10d_args(port, 3, "short", conf="join_timeout=2"), timeout=60)
        self.assertEqual(rc, 1, err)
        self.assertIn("waiting for rendezvous job=short", err)
        self.assertIn("1/3 nodes", err)

    def test_nnodes_disagreement_is_refused(self):
        port, run_id = free_port(), uuid.uuid4().hex
        first = start(self.c10d_args(port, 2, run_id, conf="join_timeout=20"))
        try:
            time.sleep(0.5)
            rc, out, err = run(self.c10d_args(port, "3:4", run_id), timeout=30)
            self.assertEqual(rc, 1, err)
            self.assertIn("--nnodes=3:4 disagrees with --nnodes=2", err)
        finally:
            first.kill()
            first.communicate(timeout=10)
