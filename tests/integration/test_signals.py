"""Signals sent to the agent reach every worker's process group."""
import os
import signal
import time

from harness import TempDirTest, clean_env, free_port, read_pids, run, start, wait_for

READY_THEN_WAIT = """
trap 'echo {sig} > {dir}/got.$LOCAL_RANK; exit {code}' {sig}
echo $$ > {dir}/ready.$LOCAL_RANK
sleep 60 &
wait
"""


class Signals(TempDirTest):
    def run_and_signal(self, nproc, sig, code, flags=(), env=None):
        worker = self.script("w.sh", READY_THEN_WAIT.format(sig=sig.name[3:], dir=self.dir, code=code))
        p = start(list(flags) + [f"--nproc-per-node={nproc}", worker], env=env)
        try:
            wait_for(lambda: len(read_pids(self.dir, "ready.")) == nproc, what="workers to be ready")
            os.kill(p.pid, sig)
            out, err = p.communicate(timeout=30)
        finally:
            p.kill()
        got = sorted(n for n in os.listdir(self.dir) if n.startswith("got."))
        return p.returncode, got, err

    def test_a_listed_sigusr1_is_forwarded_and_ends_the_job(self):
        # As in torch: every signal in the list ends the job.
        rc, got, err = self.run_and_signal(
            3, signal.SIGUSR1, 0, ["--signals-to-handle=SIGTERM,SIGINT,SIGHUP,SIGQUIT,SIGUSR1"])
        self.assertEqual(got, ["got.0", "got.1", "got.2"], err)
        self.assertEqual(rc, 128 + signal.SIGUSR1, err)
        self.assertIn("received SIGUSR1; forwarding it to workers and shutting down", err)

    def test_the_sigusr1_cxxrun_adds_in_a_slurm_step_is_only_forwarded(self):
        # Slurm's preemption warning: the workers decide, the job goes on.
        port = free_port()
        env = clean_env(SLURM_JOB_ID="4242", SLURM_STEP_ID="0", SLURM_STEP_NUM_NODES="1", SLURM_NODEID="0",
                        SLURM_STEP_NODELIST="localhost", SLURM_STEP_NUM_TASKS="1")
        rc, got, err = self.run_and_signal(2, signal.SIGUSR1, 0, [f"--rdzv-endpoint=:{port}"], env=env)
        self.assertEqual(got, ["got.0", "got.1"], err)
        self.assertEqual(rc, 0, err)
        self.assertIn("SIGUSR1 forwarded to workers", err)
        self.assertIn("forwarding SIGUSR1 to 2 workers", err)

    def test_the_sigusr1_of_a_slurm_step_during_the_rendezvous_leaves_the_agent_alive(self):
        # Slurm's warning may come before the workers run: the agent waits
        # for the other nodes, with no handler yet. SIGUSR1's default action
        # killed it, and with it the job; it is held until the workers'
        # loop listens.
        port = free_port()
        env = clean_env(SLURM_JOB_ID="4242", SLURM_STEP_ID="0", SLURM_STEP_NUM_NODES="2", SLURM_NODEID="0",
                        SLURM_STEP_NODELIST="localhost,localhost", SLURM_STEP_NUM_TASKS="2")
        p = start([f"--rdzv-endpoint=:{port}", "--nproc-per-node=1", "/bin/true"], env=env)
        try:
            time.sleep(1.5)  # waiting for a second node that never comes
            os.kill(p.pid, signal.SIGUSR1)
            time.sleep(1.0)
            self.assertIsNone(p.poll(), "the agent died of the SIGUSR1 that came during its rendezvous")
            os.kill(p.pid, signal.SIGTERM)
            out, err = p.communicate(timeout=30)
        finally:
            p.kill()
        self.assertNotEqual(p.returncode, -signal.SIGUSR1, err)

    def test_sigterm_forwarded_and_agent_exits_143(self):
        rc, got, err = self.run_and_signal(2, signal.SIGTERM, 0)
        self.assertEqual(got, ["got.0", "got.1"], err)
        self.assertEqual(rc, 128 + signal.SIGTERM, err)

    def test_sigint_is_forwarded_as_sigint(self):
        rc, got, err = self.run_and_signal(2, signal.SIGINT, 0)
        self.assertEqual(got, ["got.0", "got.1"], err)
        self.assertEqual(rc, 128 + signal.SIGINT, err)
