"""Nothing a worker starts escapes its job, even a process that drops the
environment (env -i), leaves the session (setsid) or double-forks: in a
cgroup of the job's own where cgroup v2 is writable (root), else found as
the agent's descendants (child subreaper). Each test checks /proc for any
process whose argv carries the test's marker.
"""
import os
import signal
import time

from harness import OrphanCheckTest, clean_env, end, run, start, wait_for, with_marker

ESCAPES = {
    "env -i": "env -i sleep 120 {m} &",
    "setsid env -i": "setsid env -i sleep 120 {m} &",
    "double fork without the environment": "( env -i bash -c 'sleep 120 {m} &' & ) ; sleep 0.1",
}


def uses_cgroup(err):
    return "containment: the job's processes live in cgroup" in err


class Containment(OrphanCheckTest):
    def job(self, escape, tail, mode, nproc=2):
        worker = self.script("w.sh", ESCAPES[escape].format(m=self.marker) + "\n" + tail + "\n")
        env = clean_env(CXXRUN_CONTAINMENT=mode)
        return run(["--standalone", f"--nproc-per-node={nproc}", "--no-python", worker], env=env, timeout=60)

    def check_modes(self, tail, expected_rc):
        for mode in ("auto", "subreaper"):
            for escape in ESCAPES:
                with self.subTest(mode=mode, escape=escape):
                    rc, _, err = self.job(escape, tail, mode)
                    self.assertEqual(rc, expected_rc, err)
                    self.assertEqual(with_marker(self.marker), [], err)
                    # Gone with the workers, not after the 2 s pipe limit.
                    self.assertNotIn("output pipes still open", err)
                    self.assertEqual(err.count("containment:"), 1, err)
                    if mode == "subreaper":
                        self.assertFalse(uses_cgroup(err), err)
                    elif os.geteuid() == 0:
                        self.assertTrue(uses_cgroup(err), err)

    def test_nothing_outlives_a_job_that_succeeds(self):
        self.check_modes("sleep 0.3", 0)

    def test_nothing_outlives_a_job_that_fails(self):
        self.check_modes("sleep 0.3; exit 3", 3)

    def test_nothing_outlives_an_agent_killed_by_sigkill(self):
        if os.geteuid() != 0:
            self.skipTest("needs root: only a cgroup holds what the agent cannot find after its death")
        for escape in ESCAPES:
            with self.subTest(escape=escape):
                worker = self.script("w.sh", ESCAPES[escape].format(m=self.marker) + "\nexec sleep 60\n")
                p = start(["--standalone", "--nproc-per-node=2", "--no-python", worker], env=clean_env())
                try:
                    wait_for(lambda: len(with_marker(self.marker)) == 2, timeout=20, what="both escapes")
                    time.sleep(0.1)
                    os.kill(p.pid, signal.SIGKILL)
                    p.wait(timeout=10)
                    _, err = p.communicate(timeout=10)
                    if not uses_cgroup(err):
                        self.skipTest("no writable cgroup v2 here: " + err)
                    wait_for(lambda: not with_marker(self.marker), timeout=10,
                             what="the guardian to kill the job's cgroup")
                finally:
                    if p.poll() is None:
                        p.kill()
                        p.wait(timeout=10)

    def test_nothing_a_health_check_starts_outlives_it(self):
        # Checks run before the job's cgroup exists, or outside it: their
        # runner is the subreaper of what they start, and kills it all.
        for escape in ESCAPES:
            with self.subTest(escape=escape):
                # A moment for the escape to be done before the check ends.
                check = self.script("check.sh", ESCAPES[escape].format(m=self.marker) + "\nsleep 0.2\necho fine\n")
                rc, _, err = run(["--standalone", "--nproc-per-node=1", f"--health-check={check}", "--no-python",
                                  "true"], timeout=60)
                self.assertEqual(rc, 0, err)
                self.assertIn("health check command: fine", err)
                self.assertEqual(with_marker(self.marker), [], err)

    def test_nothing_a_health_check_starts_outlives_an_agent_killed_by_sigkill(self):
        check = self.script("check.sh", f"setsid sleep 120 {self.marker} &\nexec sleep 120 {self.marker}\n")
        p = start(["--standalone", "--nproc-per-node=1", f"--health-check={check}", "--no-python", "true"])
        try:
            wait_for(lambda: len(with_marker(self.marker)) == 2, timeout=20, what="the check and its daemon")
            os.kill(p.pid, signal.SIGKILL)
            p.wait(timeout=10)
            # The check's runner sees the agent's end of a pipe close.
            wait_for(lambda: not with_marker(self.marker), timeout=10, what="the check's processes to end")
        finally:
            end(p)

    def test_a_stopped_guardian_does_not_hold_the_agents_exit(self):
        go = f"{self.dir}/go"
        worker = self.script("w.sh", f"for i in $(seq 400); do [ -e {go} ] && exit 0; sleep 0.05; done; exit 1\n")
        p = start(["--standalone", "--nproc-per-node=1", "--no-python", worker])
        guardian = []
        try:
            wait_for(lambda: guardian.extend(children_named(p.pid, "cxxrun-guardian")) or guardian, timeout=20,
                     what="the guardian")
            os.kill(guardian[0], signal.SIGSTOP)  # what `pkill -STOP cxxrun` does to it
            wait_for(lambda: state_of(guardian[0]) == "T", timeout=10, what="the guardian to stop")
            open(go, "w").close()
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 0, err)
            self.assertIn("exiting with code 0", err)
        finally:
            end(p)
            for pid in guardian:
                if state_of(pid) not in ("", "Z"):
                    os.kill(pid, signal.SIGKILL)


def children_named(pid, name):
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
    except OSError:
        return []
    found = []
    for child in children:
        try:
            with open(f"/proc/{child}/comm") as f:
                if f.read().strip() == name:
                    found.append(child)
        except OSError:
            pass
    return found


def state_of(pid):
    """A process's state letter ("S", "T", "Z"...), "" once it is gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return ""
    return stat[stat.rfind(")") + 2]
