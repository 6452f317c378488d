"""Agents meet through a private three-member etcd cluster
(--rdzv-backend=etcd-v3): one job forms, the job outlives etcd's leader,
a dead agent's lease expires and the survivors re-form, TLS with client
certificates, and one clear line for what cannot work (docs/etcd.md)."""
import json
import os
import signal
import subprocess
import time
import unittest
import urllib.request
import uuid

import etcd_cluster
from harness import OrphanCheckTest, alive, finish_all, free_port, read_pids, start, wait_for, with_marker


class EtcdCase(etcd_cluster.ClusterTest, OrphanCheckTest):
    def setUp(self):
        super().setUp()
        # Every member runs: a test that killed one has restarted it.
        for i in range(self.cluster.size):
            if not self.cluster.members[i].running():
                self.cluster.restart_member(i)
        self.out = os.path.join(self.dir, "out")
        os.makedirs(self.out)

    def conf(self, extra=""):
        keys = []
        if self.tls:
            c = self.cluster
            keys.append(f"protocol=https,cacert={c.ca},cert={c.client_cert},key={c.client_key}")
        if extra:
            keys.append(extra)
        return ["--rdzv-conf=" + ",".join(keys)] if keys else []

    def args(self, nnodes, worker, run_id=None, conf="", extra=(), endpoints=None):
        return (["--rdzv-backend=etcd-v3", f"--rdzv-endpoint={endpoints or self.cluster.endpoints()}",
                 f"--rdzv-id={run_id or uuid.uuid4().hex}", f"--nnodes={nnodes}", "--nproc-per-node=2",
                 *self.conf(conf), *extra, worker])

    def recorder(self, body=""):
        """A worker that records its environment once per attempt, then runs `body`."""
        return self.script("worker.sh", f"""env -0 > {self.out}/.tmp.$$ && mv {self.out}/.tmp.$$ \\
  {self.out}/env.$RANK.$TORCHELASTIC_RESTART_COUNT
{body}""")

    def envs(self):
        out = {}
        for name in sorted(os.listdir(self.out)):
            if name.startswith("env."):
                with open(os.path.join(self.out, name)) as f:
                    out[name] = dict(kv.split("=", 1) for kv in f.read().split("\0") if kv)
        return out

    def check_ranks(self, envs, nodes, nproc=2):
        world = nodes * nproc
        self.assertEqual(sorted(int(e["RANK"]) for e in envs), list(range(world)))
        self.assertEqual({e["WORLD_SIZE"] for e in envs}, {str(world)})
        self.assertEqual({e["GROUP_WORLD_SIZE"] for e in envs}, {str(nodes)})
        self.assertEqual(len({(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs}), 1)


class EtcdRendezvous(EtcdCase):
    def test_three_agents_form_one_job(self):
        run_id, worker = uuid.uuid4().hex, self.recorder()
        procs = [start(self.args(3, worker, run_id)) for _ in range(3)]
        for rc, out, err in finish_all(self, procs, 60):
            self.assertEqual(rc, 0, err)
            self.assertIn("rendezvous through etcd at http://", err)
        envs = list(self.envs().values())
        self.check_ranks(envs, 3)
        self.assertEqual({e["TORCHELASTIC_RUN_ID"] for e in envs}, {run_id})
        # The last agent to leave removes the job's keys: the id can run again.
        self.assertEqual(self.cluster.etcdctl("get", "--prefix", "--keys-only",
                                              f"/torchelastic/p2p/cxxrun/rdzv/{run_id}/").stdout.strip(), "")
        true_sh = self.script("true.sh", "exit 0\n")
        procs = [start(self.args(3, true_sh, run_id)) for _ in range(3)]
        for rc, out, err in finish_all(self, procs, 60):
            self.assertEqual(rc, 0, err)

    def test_a_node_waiting_longer_than_its_lease_keeps_it(self):
        # The first agent waits 5 s for the second, longer than its lease's
        # TTL (3 s): it renews the lease while it waits, so the round forms
        # with both alive, nobody counts it dead and the job runs once. The
        # workers run 2 s, long enough for keep-alives and the dead check.
        run_id, worker = uuid.uuid4().hex, self.recorder("sleep 2")
        first = start(self.args(2, worker, run_id))
        time.sleep(5)
        second = start(self.args(2, worker, run_id))
        for rc, out, err in finish_all(self, [first, second], 60):
            self.assertEqual(rc, 0, err)
            self.assertNotIn("lease on etcd expired", err)
            self.assertNotIn("stopped sending keep-alives", err)
            self.assertNotIn("re-forming", err)
        self.assertEqual(sorted(self.envs()), [f"env.{r}.0" for r in range(4)])

    def test_job_outlives_the_etcd_leader(self):
        # SIGKILL etcd's leader while the workers run: the job finishes with
        # exit 0 and no restart (each worker recorded one attempt only).
        worker = self.recorder(f"for i in $(seq 40); do sleep 0.1; done\n")
        run_id = uuid.uuid4().hex
        procs = [start(self.args(2, worker, run_id)) for _ in range(2)]
        wait_for(lambda: len(self.envs()) == 4, timeout=30, what="all four workers to start")
        leader = self.cluster.leader()
        killed = time.monotonic()
        self.cluster.kill(leader)
        results = finish_all(self, procs, 60)
        print(f"\netcd leader (member {leader}) killed; job ended {time.monotonic() - killed:.1f}s later", flush=True)
        for rc, out, err in results:
            self.assertEqual(rc, 0, err)
            self.assertNotIn("re-forming", err)
        self.assertEqual(sorted(self.envs()), [f"env.{r}.0" for r in range(4)])

    def trio(self):
        """Three agents (--nnodes=2:3, no restart budget) whose workers sleep
        while the world has six and exit 0 in a smaller one; returned once
        all six run. A membership change is no restart: the rounds differ by
        world size."""
        worker = self.script("worker.sh", f"""env -0 > {self.out}/.tmp.$$ && mv {self.out}/.tmp.$$ \\
  {self.out}/env.$RANK.w$WORLD_SIZE.$TORCHELASTIC_RESTART_COUNT
[ "$WORLD_SIZE" = 6 ] && exec sleep 60 {self.marker}
exit 0
""")
        run_id = uuid.uuid4().hex
        procs = [start(self.args("2:3", worker, run_id, extra=["--max-restarts=0"])) for _ in range(3)]
        wait_for(lambda: len(self.envs()) == 6, timeout=30, what="all six workers to start")
        return procs

    def kill_one_and_reform(self, procs):
        """SIGKILLs the third agent: the other two must see it dead, re-form
        as two nodes and finish. Returns the seconds from the kill to their
        next round."""
        victim = procs[2]
        killed = time.monotonic()
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        try:
            wait_for(lambda: len([n for n in self.envs() if ".w4." in n]) == 4, timeout=30,
                     what="the survivors' next round to start")
        except AssertionError:
            # What the survivors said is the only account of why (this has
            # failed once in CI without one): stopped, and their logs shown.
            for p in procs[:2]:
                p.terminate()
                try:
                    _, err = p.communicate(timeout=20)
                except subprocess.TimeoutExpired:
                    p.kill()
                    _, err = p.communicate(timeout=10)
                print(f"\n--- agent pid {p.pid}, stderr:\n{err}", flush=True)
            raise
        reformed = time.monotonic() - killed
        for rc, out, err in finish_all(self, procs[:2], 60):
            self.assertEqual(rc, 0, err)
            self.assertIn("a node stopped sending keep-alives; restarting the job without it", err)
        wait_for(lambda: not with_marker(self.marker), timeout=10, what="the dead agent's workers to go")
        return reformed

    def test_dead_agent_lease_expires_and_survivors_reform(self):
        # One of three agents is SIGKILLed. Its lease expires (TTL 3 s), the
        # others see the DELETE on their watch and re-form as two nodes, a
        # membership change that costs no restart budget (--max-restarts=0).
        reformed = self.kill_one_and_reform(self.trio())
        print(f"\nsurvivors re-formed {reformed:.1f}s after an agent's SIGKILL", flush=True)
        second = [e for n, e in self.envs().items() if ".w4." in n]
        self.check_ranks(second, 2)
        self.assertEqual({e["TORCHELASTIC_RESTART_COUNT"] for e in second}, {"0"}, "no restart budget used")

    def test_a_killed_job_launched_again_under_its_id_runs(self):
        # Both agents of a job are SIGKILLed; etcd keeps its full round 0.
        # Launched again under the same id, as a requeued batch job is, the
        # new agents join round 0 beyond its members, as spares, each with an
        # alive key of its own in that round (a join writes it with its add).
        # The spares count the members' keys alone (a spare drops its own),
        # so once the killed agents' leases expire they find no member
        # alive, open round 1 and run, instead of waiting until join_timeout.
        run_id = uuid.uuid4().hex
        conf = "keep_alive_interval=0.3,keep_alive_max_attempt=3,join_timeout=60"
        worker = self.script("w.sh", f"echo $$ > {self.out}/pid.$RANK.$$\nexec sleep 60\n")
        procs = [start(self.args(2, worker, run_id, conf=conf)) for _ in range(2)]
        wait_for(lambda: len(read_pids(self.out, "pid.")) == 4, timeout=30, what="the first job's four workers")
        for p in procs:
            p.kill()
            p.wait(timeout=10)
        first = read_pids(self.out, "pid.")
        wait_for(lambda: not any(alive(p) for p in first), timeout=10, what="the killed job's workers to go")
        self.script("w.sh", f"echo $$ > {self.out}/again.$RANK.$$\n")  # the same program, now quick
        again = [start(self.args(2, worker, run_id, conf=conf)) for _ in range(2)]
        results = finish_all(self, again, 60)
        for rc, out, err in results:
            self.assertEqual(rc, 0, err)
        self.assertIn("is alive (was its job killed?); opening round 1", "\n".join(err for _, _, err in results))
        self.assertEqual(len(read_pids(self.out, "again.")), 4)

    def test_a_member_stepping_out_at_a_restart_is_replaced_by_a_waiting_spare(self):
        # A re-join whose round changed by more than its failure: a member
        # steps out (its health check fails at the restart) and a spare
        # waits. The join that checks, in its add, that nothing else changed
        # finds it did and writes nothing; the survivor counts the spare in
        # and the member out, and the job goes on at its full size.
        # Named by pid too: the spare's first attempt is attempt 0 as well.
        worker = self.script("worker.sh", f"""env -0 > {self.out}/.tmp.$$ && mv {self.out}/.tmp.$$ \\
  {self.out}/env.$RANK.$TORCHELASTIC_RESTART_COUNT.$$
if [ "$RANK" = 0 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then sleep 3; exit 3; fi
""")
        counter = os.path.join(self.dir, "checks")
        check = f"echo x >> {counter}; [ $(wc -l < {counter}) -lt 2 ] || {{ echo 'disk /scratch is failing'; exit 1; }}"
        run_id = uuid.uuid4().hex
        flaky = start(self.args(2, worker, run_id, extra=[f"--health-check={check}", "--max-restarts=1"]))
        steady = start(self.args(2, worker, run_id, extra=["--max-restarts=1"]))
        wait_for(lambda: len(self.envs()) == 4, timeout=30, what="the first round's 4 workers")
        spare = start(self.args(2, worker, run_id, extra=["--max-restarts=1"]))
        results = finish_all(self, [flaky, steady, spare], 90)
        rc, out, err = results[0]
        self.assertEqual(rc, 243, err)
        self.assertIn("disk /scratch is failing", err)
        for rc, out, err in results[1:]:
            self.assertEqual(rc, 0, err)
        # The round after the restart: the steady node's attempt 1 and the
        # spare's first, one workers' store.
        envs = self.envs().values()
        master = {(e["MASTER_ADDR"], e["MASTER_PORT"]) for e in envs if e["TORCHELASTIC_RESTART_COUNT"] == "1"}
        self.assertEqual(len(master), 1)
        self.check_ranks([e for e in envs if (e["MASTER_ADDR"], e["MASTER_PORT"]) in master], 2)

    def test_abort_reaches_every_agent_after_a_member_restart(self):
        # The member holding most of the agents' watches is killed and
        # started again while the job runs. A worker failure after that must
        # still reach every agent through the resumed watches: both restart
        # (attempt 1) and finish.
        worker = self.recorder(f"""if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  for i in $(seq 300); do [ -e {self.out}/go ] && {{ [ "$RANK" = 3 ] && exit 4; }}; sleep 0.1; done
  exit 9
fi
exit 0
""")
        args = self.args(2, worker, uuid.uuid4().hex, extra=["--max-restarts=1"])
        procs = [start(args) for _ in range(2)]
        wait_for(lambda: len(self.envs()) == 4, timeout=30, what="all four workers to start")
        busiest = self.cluster.busiest_watch_member()
        self.assertGreater(self.cluster.watchers(busiest), 0)
        self.cluster.kill(busiest)
        self.cluster.restart_member(busiest)
        open(f"{self.out}/go", "w").close()
        failed_at = time.monotonic()
        wait_for(lambda: len([n for n in self.envs() if n.endswith(".1")]) == 4, timeout=30,
                 what="both nodes to restart")
        print(f"\nafter a member restart, the failure restarted both nodes in {time.monotonic() - failed_at:.2f}s",
              flush=True)
        for rc, out, err in finish_all(self, procs, 60):
            self.assertEqual(rc, 0, err)

    def test_watches_resume_after_etcd_compacted_their_history(self):
        # The member holding the agents' watches restarts after etcd
        # compacted every revision they had seen, as an operator's
        # --auto-compaction-retention does during a long job. The watches
        # cannot resume where they were: they read the state again and watch
        # from now. An agent SIGKILLed after that is still seen dead, and
        # the survivors re-form.
        procs = self.trio()
        for i in range(3):
            self.cluster.etcdctl("put", f"/elsewhere/{i}", "x")
        revision = max(int(st["header"]["revision"]) for st in self.cluster.statuses().values())
        self.cluster.etcdctl("compaction", str(revision))
        busiest = self.cluster.busiest_watch_member()
        self.assertGreater(self.cluster.watchers(busiest), 0)
        self.cluster.kill(busiest)
        self.cluster.restart_member(busiest)
        self.kill_one_and_reform(procs)

    def test_training_goes_on_without_quorum(self):
        # Two of three members stop while the workers run: etcd has no
        # quorum. The workers go on and /healthz says the store is
        # unreachable. Then a worker fails: its node waits read_timeout for
        # etcd and ends with one clear line.
        out = self.out
        worker = self.script("worker.sh", f"""touch {out}/started.$RANK
for i in $(seq 600); do
  echo $i >> {out}/progress.$RANK
  if [ -e {out}/go ]; then [ "$RANK" = 3 ] && exit 5; sleep 1; exit 0; fi
  sleep 0.1
done
""")
        health = free_port()
        args = self.args(2, worker, uuid.uuid4().hex, conf="read_timeout=5", extra=["--max-restarts=3"])
        procs = [start([f"--health-port={health}"] + args), start(args)]
        wait_for(lambda: len([n for n in os.listdir(out) if n.startswith("started.")]) == 4, timeout=30,
                 what="all four workers to start")
        self.cluster.stop_member(1)
        self.cluster.stop_member(2)
        healthz = lambda: json.loads(urllib.request.urlopen(f"http://127.0.0.1:{health}/healthz", timeout=5).read())
        wait_for(lambda: not healthz()["rendezvous_reachable"], timeout=20, what="/healthz to report the outage")
        self.assertEqual(healthz()["state"], "HEALTHY")
        def progress():
            counts = []
            for r in range(4):
                with open(f"{out}/progress.{r}") as f:
                    counts.append(len(f.read().split()))
            return counts

        before = progress()
        wait_for(lambda: all(a > b + 5 for a, b in zip(progress(), before)), timeout=20,
                 what="every worker to make progress without quorum")
        open(f"{out}/go", "w").close()
        failed_at = time.monotonic()
        results = finish_all(self, procs, 60)
        print(f"\nwithout quorum, a failure ended the job {time.monotonic() - failed_at:.1f}s later "
              f"(read_timeout 5 s)", flush=True)
        errs = "".join(err for _, _, err in results)
        for rc, _, err in results:
            self.assertNotEqual(rc, 0, err)
        self.assertEqual(errs.count("did not answer within read_timeout=5000 ms (etcd without quorum?); the job "
                                    "cannot re-form without it"), 1, errs)
        self.assertIn("the workers go on", errs)


class EtcdBadInput(EtcdCase):
    def one_line_failure(self, args, expect):
        p = start(args)
        (rc, out, err), = finish_all(self, [p], 60)
        self.assertNotEqual(rc, 0, err)
        lines = [l for l in err.splitlines() if expect in l]
        self.assertEqual(len(lines), 1, err)
        self.assertNotIn("Traceback", err)
        return lines[0]

    def test_unreachable_members_are_named(self):
        # Tried until join_timeout, as a c10d store is (etcd may be starting
        # with the job), with a line per try; then one line naming them all.
        dead = f"127.0.0.1:{free_port()},127.0.0.1:{free_port()}"
        started = time.monotonic()
        line = self.one_line_failure(self.args(1, "/bin/true", conf="join_timeout=7", endpoints=dead),
                                     "cannot reach the etcd cluster")
        self.assertLess(time.monotonic() - started, 30)
        self.assertIn("join_timeout=7 s", line)
        for member in dead.split(","):
            self.assertIn(member, line)


class EtcdAuth(EtcdCase):
    """A cluster with authentication on: --rdzv-conf token_file holds an
    etcd user's NAME:PASSWORD."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cluster.enable_auth()

    def token(self, text):
        path = os.path.join(self.dir, "etcd-user")
        with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
            f.write(text + "\n")
        return path

    def test_token_file_holds_an_etcd_users_credentials(self):
        worker, run_id = self.recorder(), uuid.uuid4().hex
        conf = f"token_file={self.token('alice:alicepw')}"
        procs = [start(self.args(2, worker, run_id, conf=conf)) for _ in range(2)]
        for rc, out, err in finish_all(self, procs, 60):
            self.assertEqual(rc, 0, err)
            self.assertNotIn("alicepw", err)
        self.check_ranks(list(self.envs().values()), 2)

    def test_wrong_password_is_one_clear_line(self):
        conf = f"token_file={self.token('alice:wrong')},read_timeout=5"
        p = start(self.args(1, "/bin/true", conf=conf))
        (rc, out, err), = finish_all(self, [p], 60)
        self.assertNotEqual(rc, 0, err)
        lines = [l for l in err.splitlines() if "cannot reach the etcd cluster" in l]
        self.assertEqual(len(lines), 1, err)
        self.assertIn("authentication failed", lines[0])
        self.assertNotIn("wrong", err)


class EtcdTls(EtcdCase):
    tls = True

    def test_https_with_client_certificates(self):
        worker, run_id = self.recorder(), uuid.uuid4().hex
        procs = [start(self.args(2, worker, run_id)) for _ in range(2)]
        for rc, out, err in finish_all(self, procs, 60):
            self.assertEqual(rc, 0, err)
            self.assertIn("rendezvous through etcd at https://", err)
        self.check_ranks(list(self.envs().values()), 2)

    def test_wrong_ca_is_one_clear_line(self):
        c = self.cluster
        args = ["--rdzv-backend=etcd-v3", f"--rdzv-endpoint={c.endpoints()}", "--rdzv-id=x", "--nnodes=1",
                f"--rdzv-conf=protocol=https,cacert={c.other_ca},cert={c.client_cert},key={c.client_key},"
                "read_timeout=3", "/bin/true"]
        p = start(args)
        (rc, out, err), = finish_all(self, [p], 60)
        self.assertNotEqual(rc, 0, err)
        self.assertRegex(err, r"cannot reach the etcd cluster: .*(certificate|TLS)")

    def test_no_client_certificate_is_one_clear_line(self):
        c = self.cluster
        args = ["--rdzv-backend=etcd-v3", f"--rdzv-endpoint={c.endpoints()}", "--rdzv-id=x", "--nnodes=1",
                f"--rdzv-conf=protocol=https,cacert={c.ca},read_timeout=3", "/bin/true"]
        p = start(args)
        (rc, out, err), = finish_all(self, [p], 60)
        self.assertNotEqual(rc, 0, err)
        self.assertIn("cannot reach the etcd cluster", err)


if __name__ == "__main__":
    unittest.main()
