"""The torchrun environment contract (docs/torchrun-compat.md §3) for N = 1, 4, 8."""
import os
import re

from harness import TempDirTest, clean_env, run

TORCHRUN_VARS = [
    "LOCAL_RANK", "RANK", "GROUP_RANK", "ROLE_RANK", "ROLE_NAME", "LOCAL_WORLD_SIZE", "WORLD_SIZE",
    "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RESTART_COUNT",
    "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_RUN_ID", "TORCHELASTIC_USE_AGENT_STORE",
    "TORCHELASTIC_ERROR_FILE", "TORCH_NCCL_ASYNC_ERROR_HANDLING",
]


class EnvContract(TempDirTest):
    def dump_envs(self, nproc, *flags, env=None):
        dump = self.script("dump.sh", f'env -0 > {self.dir}/env.$LOCAL_RANK\n')
        rc, out, err = run(list(flags) + [f"--nproc-per-node={nproc}", dump], env=env)
        self.assertEqual(rc, 0, err)
        envs = []
        for r in range(nproc):
            with open(f"{self.dir}/env.{r}") as f:
                envs.append(dict(kv.split("=", 1) for kv in f.read().split("\0") if kv))
        return envs, err

    def check_contract(self, nproc):
        env = clean_env(PET_RDZV_ID="job42", KEEP_ME="yes")
        envs, err = self.dump_envs(nproc, "--max-restarts=3", env=env)
        self.assertEqual(sorted(int(e["RANK"]) for e in envs), list(range(nproc)))
        for local_rank, e in enumerate(envs):
            for var in TORCHRUN_VARS:
                self.assertIn(var, e)
            self.assertEqual(e["LOCAL_RANK"], str(local_rank))
            self.assertEqual(e["RANK"], str(local_rank))
            self.assertEqual(e["ROLE_RANK"], str(local_rank))
            self.assertEqual(e["GROUP_RANK"], "0")
            self.assertEqual(e["ROLE_NAME"], "default")
            for var in ("LOCAL_WORLD_SIZE", "WORLD_SIZE", "ROLE_WORLD_SIZE"):
                self.assertEqual(e[var], str(nproc))
            self.assertEqual(e["GROUP_WORLD_SIZE"], "1")
            self.assertEqual(e["MASTER_ADDR"], "127.0.0.1")
            self.assertEqual(e["MASTER_PORT"], env["PET_MASTER_PORT"])
            self.assertEqual(e["TORCHELASTIC_RESTART_COUNT"], "0")
            self.assertEqual(e["TORCHELASTIC_MAX_RESTARTS"], "3")
            self.assertEqual(e["TORCHELASTIC_RUN_ID"], "job42")
            self.assertEqual(e["TORCHELASTIC_USE_AGENT_STORE"], "True")  # the agent serves MASTER_PORT
            self.assertEqual(e["TORCH_NCCL_ASYNC_ERROR_HANDLING"], "1")
            self.assertRegex(e["TORCHELASTIC_ERROR_FILE"], rf"/job42_[^/]+/attempt_0/{local_rank}/error\.json$")
            self.assertEqual(e["KEEP_ME"], "yes", "the agent's own environment reaches workers")
        if nproc > 1:
            self.assertTrue(all(e["OMP_NUM_THREADS"] == "1" for e in envs))
            self.assertIn("Setting OMP_NUM_THREADS environment variable for each process to be 1", err)
        else:
            self.assertNotIn("OMP_NUM_THREADS", envs[0])

    def test_one_worker(self):
        self.check_contract(1)

    def test_four_workers(self):
        self.check_contract(4)

    def test_eight_workers(self):
        self.check_contract(8)

    def test_omp_num_threads_kept_when_set(self):
        envs, err = self.dump_envs(2, env=clean_env(OMP_NUM_THREADS="7"))
        self.assertEqual({e["OMP_NUM_THREADS"] for e in envs}, {"7"})
        self.assertNotIn("Setting OMP_NUM_THREADS", err)

    def test_standalone_picks_free_port_and_unique_run_id(self):
        first, _ = self.dump_envs(2, "--standalone")
        second, _ = self.dump_envs(2, "--standalone")
        uuid = r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$"
        for envs in (first, second):
            self.assertEqual(len({e["MASTER_PORT"] for e in envs}), 1)
            self.assertEqual(len({e["TORCHELASTIC_RUN_ID"] for e in envs}), 1)
            self.assertRegex(envs[0]["TORCHELASTIC_RUN_ID"], uuid)
            self.assertNotEqual(envs[0]["MASTER_PORT"], "29400")
        self.assertNotEqual(first[0]["TORCHELASTIC_RUN_ID"], second[0]["TORCHELASTIC_RUN_ID"])

    def test_local_rank_macro_and_args_untouched(self):
        echo = self.script("echo.sh", f'echo "$@" > {self.dir}/args.$LOCAL_RANK\n')
        rc, _, err = run(["--nproc-per-node=2", echo, "--rank=${local_rank}", "--nproc-per-node", "3"])
        self.assertEqual(rc, 0, err)
        for r in range(2):
            with open(f"{self.dir}/args.{r}") as f:
                self.assertEqual(f.read().strip(), f"--rank={r} --nproc-per-node 3")

    def test_role_and_prefix_template(self):
        hello = self.script("hello.sh", 'echo hello\n')
        rc, out, err = run(["--nproc-per-node=2", "--role=trainer", hello])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), ["[trainer0]:hello", "[trainer1]:hello"])
        rc, out, err = run(["--nproc-per-node=2", hello],
                           env=clean_env(TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="<${rank}|${local_rank}> "))
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), ["<0|0> hello", "<1|1> hello"])
