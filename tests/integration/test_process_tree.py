"""No worker or grandchild outlives the job, however the agent ends."""
import os
import signal

from harness import TempDirTest, alive, clean_env, read_pids, run, start, wait_for

# Each worker starts two grandchildren: one in its own process group and one
# that leaves the session entirely (setsid), the way daemons and some
# dataloaders do; then records every pid.
SPAWNER = """
sleep 300 &
echo $! > {dir}/gc.$LOCAL_RANK.a
setsid sleep 300 &
echo $! > {dir}/gc.$LOCAL_RANK.b
echo $$ > {dir}/worker.$LOCAL_RANK
{tail}
"""


class ProcessTree(TempDirTest):
    def spawner(self, tail):
        return self.script("w.sh", SPAWNER.format(dir=self.dir, tail=tail))

    def all_recorded(self, nproc):
        return len(read_pids(self.dir, "worker.")) == nproc and len(read_pids(self.dir, "gc.")) == 2 * nproc

    def assert_all_gone(self):
        pids = read_pids(self.dir, "worker.") + read_pids(self.dir, "gc.")
        self.assertTrue(pids)
        wait_for(lambda: not any(alive(p) for p in pids), timeout=10,
                 what=f"processes {[p for p in pids if alive(p)]} to die")

    def test_sigkill_of_agent_leaves_nothing_alive(self):
        tmp = os.path.join(self.dir, "tmp")
        os.mkdir(tmp)
        p = start(["--nproc-per-node=3", self.spawner("wait")], env=clean_env(TMPDIR=tmp))
        try:
            wait_for(lambda: self.all_recorded(3), what="workers and grandchildren to start")
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
            self.assert_all_gone()
            wait_for(lambda: os.listdir(tmp) == [], timeout=10, what="the temporary log dir to be removed")
        finally:
            p.kill()
            p.communicate(timeout=10)

    def test_grandchildren_killed_when_a_rank_fails(self):
        worker = self.spawner(f"""
if [ "$LOCAL_RANK" = 1 ]; then
  while [ $(ls {self.dir} | grep -c '^worker\\.') -lt 2 ]; do sleep 0.01; done
  exit 9
fi
wait""")
        rc, out, err = run(["--nproc-per-node=2", worker], timeout=60)
        self.assertEqual(rc, 9, err)
        self.assert_all_gone()

    def test_grandchildren_killed_after_success(self):
        rc, out, err = run(["--nproc-per-node=2", self.spawner("exit 0")], timeout=60)
        self.assertEqual(rc, 0, err)
        self.assert_all_gone()

    def test_worker_ignoring_sigterm_is_killed_after_grace(self):
        worker = self.script("w.sh", f"""
trap '' TERM
echo $$ > {self.dir}/worker.$LOCAL_RANK
[ "$LOCAL_RANK" = 0 ] && {{ sleep 0.2; exit 1; }}
while true; do sleep 0.05; done
""")
        rc, out, err = run(["--nproc-per-node=2", "--shutdown-timeout=0.5", worker], timeout=30)
        self.assertEqual(rc, 1, err)
        self.assertIn("SIGKILL", err)
        self.assert_all_gone()
