"""Chaos tests of the elastic agent: agents on loopback, c10d rendezvous.

Every test ends by checking /proc: no worker of the job is left alive.
"""
import os
import signal
import socket
import subprocess
import time
import uuid

from harness import CXXRUN, RDZV_SERVER, TempDirTest, alive, finish_all, free_port, read_pids, start, summary_blocks, wait_for




def seconds_after(err, text, since):
    """Seconds from `since` (time.time()) to the agent's log line holding
    `text`, by the line's own [HH:MM:SS.mmm] stamp (local time)."""
    line = next(l for l in err.splitlines() if text in l)
    stamp = line[1:line.index("]")]
    day = time.localtime(since)
    h, m, s = stamp.split(":")
    logged = time.mktime(day[:3] + (int(h), int(m), 0) + day[6:]) + float(s)
    return logged - since


class Elastic(TempDirTest):
    def setUp(self):
        super().setUp()
        self.port = free_port()
        self.run_id = uuid.uuid4().hex[:12]
        self.procs = []

    def tearDown(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            p.communicate(timeout=10)
        pids = read_pids(self.dir, "pid.")
        wait_for(lambda: not any(alive(p) for p in pids), timeout=10, what="every worker to be gone")
        super().tearDown()

    def agent(self, worker, nnodes, nproc=2, conf="", extra=()):
        args = ["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{self.port}", f"--rdzv-id={self.run_id}",
                f"--nnodes={nnodes}", f"--nproc-per-node={nproc}"] + list(extra)
        if conf:
            args.append(f"--rdzv-conf={conf}")
        p = start(args + [worker])
        self.procs.append(p)
        return p

    def serve_rendezvous(self):
        """The job's store in cxxrun-rdzv on the endpoint's port, stopped
        after the test: it outlives every agent, as on a cluster."""
        server = subprocess.Popen([RDZV_SERVER, f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        self.addCleanup(lambda: (server.kill(), server.wait(timeout=10)))

    def finish(self, procs, timeout=90):
        return [(rc, err) for rc, _, err in finish_all(self, procs, timeout)]

    def starts(self, attempt):
        return sorted(int(n.split(".")[2]) for n in os.listdir(self.dir) if n.startswith(f"start.{attempt}."))

    def test_worker_killed_on_one_node_restarts_every_node(self):
        worker = self.script("w.sh", f"""
echo $$ > {self.dir}/pid.$TORCHELASTIC_RESTART_COUNT.$RANK
touch {self.dir}/start.$TORCHELASTIC_RESTART_COUNT.$RANK
[ "$TORCHELASTIC_RESTART_COUNT" = 1 ] && exit 0
if [ "$RANK" = 3 ]; then
  while [ $(ls {self.dir} | grep -c '^start\\.0\\.') -lt 6 ]; do sleep 0.01; done
  kill -9 $$
fi
exec sleep 60
""")
        procs = [self.agent(worker, 3, extra=["--max-restarts=1"]) for _ in range(3)]
        for rc, err in self.finish(procs):
            self.assertEqual(rc, 0, err)
        self.assertEqual(self.starts(0), list(range(6)))
        self.assertEqual(self.starts(1), list(range(6)), "every worker on every node restarted")

    def test_restart_budget_is_shared_and_counted(self):
        # Rank 1 dies at every attempt before the 20th.
        worker = self.script("w.sh", f"""
echo $$ > {self.dir}/pid.$TORCHELASTIC_RESTART_COUNT.$RANK
[ "$RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" -lt 20 ] && kill -9 $$
exit 0
""")
        for budget, expected in ((20, 0), (19, 137)):
            self.run_id = uuid.uuid4().hex[:12]
            procs = [self.agent(worker, 2, nproc=1, extra=[f"--max-restarts={budget}"]) for _ in range(2)]
            results = self.finish(procs, timeout=120)
            for rc, err in results:
                self.assertEqual(rc, expected, err)
            if expected:
                for rc, err in results:  # every node names the job's first failure
                    self.assertIn("rank      : 1 (local_rank: 0)", err)
                    self.assertIn("SIGKILL", err)

    def test_failure_stopped_by_another_nodes_abort_is_its_root_cause(self):
        # Rank 0 fails first (error file written) and is still tearing down when
        # rank 1, on the other node, exits on its own: that node's record goes
        # out first, and rank 0 dies of its agent's SIGTERM. Both nodes list
        # both, rank 0 as the root cause; the job exits with rank 1's code.
        worker = self.script("w.sh", f"""
echo $$ > {self.dir}/pid.$RANK
if [ "$RANK" = 0 ]; then
  echo '{{"message": "rank 0 broke first"}}' > "$TORCHELASTIC_ERROR_FILE"
  touch {self.dir}/rank0.failed
  exec sleep 60
fi
while [ ! -e {self.dir}/rank0.failed ]; do sleep 0.01; done
sleep 0.1
exit 3
""")
        procs = [self.agent(worker, 2, nproc=1) for _ in range(2)]
        results = self.finish(procs)
        for rc, err in results:
            self.assertEqual(rc, 3, err)
        stopped = [err for _, err in results if "had failed (its error file is written)" in err]
        self.assertEqual(len(stopped), 1, results)
        for _, err in results:
            others, root = summary_blocks(err)
            self.assertIn("rank      : 0 (local_rank: 0)", root)
            self.assertIn("traceback : rank 0 broke first", root)
            self.assertIn("exitcode  : -15 (SIGTERM from cxxrun, after this failure)", root)
            self.assertIn("rank      : 1 (local_rank: 0)", others)
            self.assertIn("exitcode  : 3", others)

    def test_sigkilled_agent_makes_survivors_rerendezvous(self):
        worker = self.script("w.sh", f"""
echo $$ > {self.dir}/pid.$GROUP_WORLD_SIZE.$RANK
touch {self.dir}/start.$GROUP_WORLD_SIZE.$RANK
[ "$GROUP_WORLD_SIZE" = 2 ] && exit 0
exec sleep 60
""")
        conf = "keep_alive_interval=0.3,keep_alive_max_attempt=3,last_call_timeout=1"
        host = self.agent(worker, "2:3", conf=conf)
        time.sleep(0.3)  # the first agent hosts the store
        others = [self.agent(worker, "2:3", conf=conf) for _ in range(2)]
        wait_for(lambda: len(self.starts(3)) == 6, timeout=30, what="six workers in a world of 3 nodes")
        victim = others[1]
        os.kill(victim.pid, signal.SIGKILL)
        victim.communicate(timeout=10)
        results = self.finish([host, others[0]])
        for rc, err in results:
            self.assertEqual(rc, 0, err)
        self.assertTrue(any("sent no keep-alive" in err for _, err in results))
        self.assertEqual(self.starts(2), [0, 1, 2, 3], "the survivors re-formed a 2-node job")

    def test_node_joining_below_max_is_taken_in(self):
        worker = self.script("w.sh", f"""
echo $$ > {self.dir}/pid.$GROUP_WORLD_SIZE.$RANK
touch {self.dir}/start.$GROUP_WORLD_SIZE.$RANK
[ "$GROUP_WORLD_SIZE" = 3 ] && exit 0
exec sleep 60
""")
        conf = "last_call_timeout=0.5"
        first = [self.agent(worker, "2:3", conf=conf) for _ in range(2)]
        wait_for(lambda: len(self.starts(2)) == 4, timeout=30, what="a 2-node job")
        late = self.agent(worker, "2:3", conf=conf)
        for rc, err in self.finish(first + [late]):
            self.assertEqual(rc, 0, err)
        self.assertEqual(self.starts(3), list(range(6)))

    def test_killed_rendezvous_server_stops_agents_cleanly(self):
        server = subprocess.Popen([RDZV_SERVER, f"--port={self.port}"], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            worker = self.script("w.sh", f"echo $$ > {self.dir}/pid.$RANK\nexec sleep 60\n")
            conf = "is_host=false,keep_alive_interval=0.3,keep_alive_max_attempt=3"
            procs = [self.agent(worker, 2, conf=conf) for _ in range(2)]
            wait_for(lambda: len(read_pids(self.dir, "pid.")) == 4, timeout=30, what="four workers")
            killed = time.time()
            server.kill()
            server.communicate(timeout=10)
            for rc, err in self.finish(procs, timeout=30):
                self.assertEqual(rc, 244, err)
                self.assertIn("lost the rendezvous store", err)
                # The promised bound: interval x attempts (0.9 s) + 1 s.
                self.assertLess(seconds_after(err, "lost the rendezvous store", killed), 1.9, err)
        finally:
            server.kill()

    def test_slow_store_does_not_delay_a_local_stop(self):
        # Every keep-alive of this node waits 8 s first. The event loop must
        # still handle SIGTERM at once: the workers see it while the slow
        # store call is still in progress, long before it returns.
        worker = self.script("w.sh", f"""
echo $$ > {self.dir}/pid.$RANK
trap 'touch {self.dir}/term.$RANK; exit 0' TERM
while :; do sleep 0.05; done
""")
        p = self.agent(worker, 1, conf="keep_alive_interval=1",
                       extra=["--inject-fault=delay_store:node=0,ms=8000"])
        wait_for(lambda: len(read_pids(self.dir, "pid.")) == 2, timeout=30, what="two workers")
        time.sleep(0.5)  # the first keep-alive is now waiting out its delay
        p.send_signal(signal.SIGTERM)
        wait_for(lambda: all(os.path.exists(f"{self.dir}/term.{r}") for r in (0, 1)), timeout=5,
                 what="both workers to get SIGTERM while the slow keep-alive is still in progress")
        (rc, err), = self.finish([p], timeout=30)
        self.assertEqual(rc, 143, err)

    def test_stopped_agent_below_the_minimum_stops_every_survivor(self):
        # --nnodes=3:3 and one agent (not group rank 0) stops: rank 0 sees it
        # dead and stops; the other survivor learns of it through the round's
        # `dead` event and must stop too, not wait out join_timeout.
        # The store outlives every agent here (cxxrun-rdzv), as on a cluster.
        self.serve_rendezvous()
        worker = self.script("w.sh", f"echo $$ > {self.dir}/pid.$RANK\nexec sleep 60\n")
        conf = "is_host=false,keep_alive_interval=0.3,keep_alive_max_attempt=3,join_timeout=120"
        procs = [self.agent(worker, "3:3", nproc=1, conf=conf) for _ in range(3)]
        wait_for(lambda: len(read_pids(self.dir, "pid.")) == 3, timeout=30, what="three workers")
        # Group ranks follow the agents' pids on one host: the largest is rank 2.
        stopped = max(procs, key=lambda p: p.pid)
        os.kill(stopped.pid, signal.SIGSTOP)
        try:
            survivors = [p for p in procs if p is not stopped]
            results = self.finish(survivors, timeout=30)
            for rc, err in results:
                self.assertEqual(rc, 244, err)
            joined = "\n".join(err for _, err in results)
            self.assertEqual(joined.count("fewer than the minimum of 3"), 2, joined)
        finally:
            stopped.kill()

    def test_a_killed_job_launched_again_under_its_id_runs(self):
        # Both agents of a job are SIGKILLed; the store (cxxrun-rdzv) keeps
        # the job's full round. Launched again under the same id, as a
        # requeued batch job is, the new agents find that round's members
        # gone, open the next round and run, instead of waiting as spares.
        self.serve_rendezvous()
        worker = self.script("w.sh", f"echo $$ > {self.dir}/pid.$RANK.$$\nexec sleep 60\n")
        conf = "is_host=false,keep_alive_interval=0.3,keep_alive_max_attempt=3"
        procs = [self.agent(worker, 2, nproc=1, conf=conf) for _ in range(2)]
        wait_for(lambda: len(read_pids(self.dir, "pid.")) == 2, timeout=30, what="two workers")
        for p in procs:
            p.kill()
            p.wait(timeout=10)
        first = read_pids(self.dir, "pid.")
        wait_for(lambda: not any(alive(p) for p in first), timeout=10, what="the killed job's workers to go")
        self.script("w.sh", f"echo $$ > {self.dir}/pid.$RANK.$$\n")  # the same program, now quick
        again = [self.agent(worker, 2, nproc=1, conf=conf) for _ in range(2)]
        results = self.finish(again, timeout=30)
        for rc, err in results:
            self.assertEqual(rc, 0, err)
        self.assertIn("is alive (was its job killed?); opening round 1", "\n".join(err for _, err in results))

    def test_a_port_taken_at_the_start_is_hosted_once_free(self):
        # Both agents find the endpoint's port taken (two agents binding at one
        # moment can both lose that way) and join as clients; once it is free
        # again, one of them must host the store, not both wait out join_timeout.
        holder = socket.socket()
        holder.bind(("127.0.0.1", self.port))
        holder.listen()
        worker = self.script("w.sh", f"echo $$ > {self.dir}/pid.$RANK\n")
        procs = [self.agent(worker, 2, nproc=1, conf="join_timeout=60") for _ in range(2)]
        time.sleep(1)
        holder.close()
        for rc, err in self.finish(procs, timeout=30):
            self.assertEqual(rc, 0, err)
            self.assertIn("joining its store as a client", err)

    def test_too_few_nodes_left_stops_with_a_clear_message(self):
        worker = self.script("w.sh", f"echo $$ > {self.dir}/pid.$RANK\nexec sleep 60\n")
        conf = "keep_alive_interval=0.3,keep_alive_max_attempt=3"
        # Node rank 1 loses its store connection: it stops (store lost), and
        # rank 0, left alone below --nnodes=2, stops too instead of waiting.
        procs = [self.agent(worker, 2, conf=conf, extra=["--inject-fault=drop_store:node=1,after=500"])]
        time.sleep(0.3)
        procs.append(self.agent(worker, 2, conf=conf, extra=["--inject-fault=drop_store:node=1,after=500"]))
        results = self.finish(procs, timeout=60)
        for rc, err in results:
            self.assertEqual(rc, 244, err)
        joined = "\n".join(err for _, err in results)
        self.assertIn("fault injection: dropping this node's store connection", joined)
        self.assertIn("fewer than the minimum of 2", joined)

