"""The etcd client (etcd/) against a private etcd cluster (etcd_cluster.py),
through tests/etcd_client_probe: the gateway's operations, failover when the
leader or the first endpoint is gone, a watch that survives the restart of
its member without losing or repeating an event, lease expiry seen by a
watcher, TLS with client certificates, authentication, and one clear line
for every way of getting the connection wrong.

Every wait has a deadline and every loop a bound. The timings the issue asks
about (cluster start, first write after the leader's SIGKILL, lease expiry
to DELETE) are printed."""
import os
import queue
import subprocess
import threading
import time
import unittest
import uuid

import etcd_cluster
from harness import free_port

PROBE = os.environ.get("ETCD_CLIENT_PROBE",
                       os.path.join(os.path.dirname(__file__), "../../build/tests/etcd_client_probe"))


def probe(args, timeout=30, env_log="warn"):
    """Runs the probe to completion: (returncode, stdout, stderr)."""
    env = dict(os.environ, ETCD_PROBE_LOG=env_log)
    p = subprocess.run([PROBE] + list(args), capture_output=True, text=True, timeout=timeout,
                       stdin=subprocess.DEVNULL, env=env)
    return p.returncode, p.stdout, p.stderr


class Lines:
    """A running probe whose stdout lines are read by a thread, so every
    read can have a deadline."""

    def __init__(self, args, stdin=False, env_log="info"):
        env = dict(os.environ, ETCD_PROBE_LOG=env_log)
        self.proc = subprocess.Popen([PROBE] + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, text=True, env=env)
        self.lines = queue.Queue()
        self.err = []
        self.pumps = [threading.Thread(target=self._pump, args=(self.proc.stdout, self.lines.put), daemon=True),
                      threading.Thread(target=self._pump, args=(self.proc.stderr, self.err.append), daemon=True)]
        for t in self.pumps:
            t.start()

    @staticmethod
    def _pump(stream, sink):
        for line in stream:
            sink(line.rstrip("\n"))

    def line(self, timeout):
        try:
            return self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no output within {timeout}s; stderr:\n" + "\n".join(self.err)) from None

    def ask(self, command, timeout=30):
        """loop mode: one command, its answer line."""
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.line(timeout)

    def close(self):
        if self.proc.poll() is None:
            if self.proc.stdin:
                self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        for t in self.pumps:  # at end of file once the process is gone
            t.join(timeout=10)
        for f in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if f and not f.closed:
                f.close()
        return self.proc.returncode


def fields(line):
    """"a=1 b=2" -> {"a": "1", "b": "2"} (words without '=' are skipped)."""
    return dict(w.split("=", 1) for w in line.split() if "=" in w)


class ClusterCase(etcd_cluster.ClusterTest):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(PROBE):
            raise unittest.SkipTest(f"{PROBE} not built")
        super().setUpClass()

    def setUp(self):
        self.prefix = f"/t/{self._testMethodName}/{uuid.uuid4().hex[:8]}/"

    def tearDown(self):
        # A test that stopped members leaves the cluster whole for the next.
        stopped = [i for i, m in enumerate(self.cluster.members) if not m.running()]
        for i in stopped:
            self.cluster.start_member(i)
        if stopped:
            self.cluster.wait_healthy()

    def ok(self, *args, timeout=30):
        rc, out, err = probe(self.cluster.client_flags() + list(args), timeout=timeout)
        self.assertEqual(rc, 0, f"{args}: {err}")
        return out.strip()

    def fails_in_one_line(self, args, timeout=30, within=None):
        """The probe exits 1 with exactly one line on stderr (no trace, no
        hang); returns that line."""
        start = time.monotonic()
        rc, out, err = probe(args, timeout=timeout)
        took = time.monotonic() - start
        self.assertEqual(rc, 1, f"{args}: rc {rc}, stdout {out!r}, stderr {err!r}")
        lines = err.strip().splitlines()
        self.assertEqual(len(lines), 1, f"{args}: stderr is not one line: {err!r}")
        self.assertTrue(lines[0].startswith("etcd_client_probe: Etcd"), lines[0])
        if within is not None:
            self.assertLess(took, within, f"{args}: took {took:.1f}s: {lines[0]}")
        return lines[0]


class KvTest(ClusterCase):
    def test_put_get_delete(self):
        k = self.prefix + "a"
        rev = int(fields(self.ok("put", k, "v1"))["revision"])
        got = fields(self.ok("get", k))
        self.assertEqual(got["value"], "v1")
        self.assertEqual(int(got["mod"]), rev)
        self.assertEqual(int(got["create"]), rev)
        self.assertEqual(got["version"], "1")
        self.assertGreaterEqual(int(got["revision"]), rev)
        self.ok("put", k, "v2")
        self.assertEqual(fields(self.ok("get", k))["version"], "2")
        self.assertEqual(self.ok("delete", k), "deleted=1")
        self.assertEqual(self.ok("delete", k), "deleted=0")
        self.assertTrue(self.ok("get", k).startswith("absent revision="))

    def test_prefix_range_and_delete(self):
        for name in ("b", "a", "c"):
            self.ok("put", self.prefix + name, "v" + name)
        self.ok("put", self.prefix[:-1] + "0", "outside")  # sorts right after the prefix's range
        out = self.ok("get-prefix", self.prefix).splitlines()
        self.assertEqual(fields(out[0])["count"], "3")
        self.assertEqual([l.split(" ")[0] for l in out[1:]],
                         [self.prefix + "a=va", self.prefix + "b=vb", self.prefix + "c=vc"])
        self.assertEqual(self.ok("delete-prefix", self.prefix), "deleted=3")
        self.assertEqual(fields(self.ok("get", self.prefix[:-1] + "0"))["value"], "outside")

    def test_txn_compare_and_set(self):
        k = self.prefix + "cas"
        self.assertTrue(self.ok("txn-cas", k, "-", "first").startswith("succeeded"))
        self.assertEqual(self.ok("txn-cas", k, "-", "again"), "failed current=first")
        self.assertTrue(self.ok("txn-cas", k, "first", "second").startswith("succeeded"))
        self.assertEqual(self.ok("txn-cas", k, "first", "third"), "failed current=second")
        self.assertEqual(fields(self.ok("get", k))["value"], "second")

    def test_leases(self):
        lease = fields(self.ok("lease-grant", "30"))
        self.assertEqual(lease["ttl"], "30")
        k = self.prefix + "leased"
        self.ok("put", k, "v", lease["lease"])
        self.assertEqual(fields(self.ok("get", k))["lease"], lease["lease"])
        ttl = int(fields(self.ok("lease-keepalive", lease["lease"]))["ttl"])
        self.assertEqual(ttl, 30)
        self.assertEqual(self.ok("lease-revoke", lease["lease"]), "revoked")
        self.assertTrue(self.ok("get", k).startswith("absent"))
        self.assertEqual(self.ok("lease-keepalive", lease["lease"]), "ttl=0")
        self.assertEqual(self.ok("lease-revoke", lease["lease"]), "absent")

    def test_watch_from_history_and_compaction(self):
        k = self.prefix + "h"
        first = int(fields(self.ok("put", k, "1"))["revision"])
        self.ok("put", k, "2")
        self.ok("delete", k)
        out = self.ok("watch", k, "--from", str(first), "--count", "3", "--idle-ms", "5000").splitlines()
        self.assertEqual([l.split(" mod=")[0] for l in out[1:]], [f"PUT {k} 1", f"PUT {k} 2", f"DELETE {k}"])
        last = int(fields(self.ok("put", k, "3"))["revision"])
        p = self.cluster.etcdctl("compaction", str(last))
        self.assertEqual(p.returncode, 0, p.stderr)
        line = self.fails_in_one_line(self.cluster.client_flags() + ["watch", k, "--from", str(first)], within=10)
        self.assertIn("EtcdCompacted", line)
        self.assertIn(f"revision {first} was compacted", line)

    def test_store_waits_for_many_keys_on_one_watch(self):
        # The rendezvous's store (EtcdStore) waiting for several keys, as a
        # round's assigner waits for every descriptor: it returns once the
        # last one is written, not before, whatever the order.
        w = Lines(self.cluster.client_flags() + ["store-wait", self.prefix.rstrip("/"), "20000",
                                                  "r0/node/0", "r0/node/1", "r0/node/2"], env_log="warn")
        try:
            self.ok("put", self.prefix + "r0/node/2", "c")
            self.ok("put", self.prefix + "r0/other", "x")
            self.ok("put", self.prefix + "r0/node/0", "a")
            time.sleep(0.5)
            self.assertIsNone(w.proc.poll(), "returned with r0/node/1 still absent")
            self.ok("put", self.prefix + "r0/node/1", "b")
            self.assertTrue(w.line(10).startswith("ready ms="))
        finally:
            self.assertEqual(w.close(), 0, "\n".join(w.err))

    def test_store_wait_times_out_naming_what_is_missing(self):
        self.ok("put", self.prefix + "k/a", "a")
        rc, out, err = probe(self.cluster.client_flags() + ["store-wait", self.prefix.rstrip("/"), "700",
                                                            "k/a", "k/b", "k/c"])
        self.assertEqual(rc, 1, out + err)
        self.assertIn("StoreTimeout: etcd wait: 2 of 3 keys were not written in time", err)

    def test_watch_cancel_from_another_thread(self):
        out = fields(self.ok("watch-cancel", self.prefix + "quiet", "300"))
        self.assertLess(int(out["after"]), 1500, out)
        self.assertEqual(out["again"], "nullopt")
        self.assertLess(int(out["total"]), 1500, out)

    def test_lease_expiry_is_a_delete_on_a_watcher(self):
        k = self.prefix + "expiring"
        ttl = 2
        watch = Lines(self.cluster.client_flags() + ["watch", k, "--count", "2", "--idle-ms", "15000"])
        try:
            self.assertTrue(watch.line(15).startswith("created"))
            put = time.monotonic()
            self.ok("put-leased", k, "v", str(ttl))
            self.assertTrue(watch.line(10).startswith(f"PUT {k} v"))
            line = watch.line(ttl + 10)
            expired_after = time.monotonic() - put
            self.assertTrue(line.startswith(f"DELETE {k}"), line)
            print(f"\nlease of {ttl} s: DELETE seen by the watcher {expired_after:.2f} s after the put", flush=True)
            self.assertLess(expired_after, ttl + 1.5)
            self.assertEqual(watch.close(), 0)
        finally:
            watch.close()


class BadConnectionTest(ClusterCase):
    """Each mistake ends in one line naming the endpoint and the cause."""
    size = 1

    def test_closed_port(self):
        port = free_port()
        line = self.fails_in_one_line(["--endpoints", f"127.0.0.1:{port}", "--timeout-ms", "1500", "get", "k"],
                                      within=6)
        self.assertIn("EtcdUnavailable", line)
        self.assertIn(f"127.0.0.1:{port}", line)
        self.assertIn("refused", line.lower())

    def test_unresolvable_host_fails_at_once(self):
        line = self.fails_in_one_line(["--endpoints", "no-such-host.invalid:2379", "put", "k", "v"], within=5)
        self.assertIn("no-such-host.invalid:2379", line)
        self.assertIn("cannot resolve", line)

    def test_bad_endpoint_text(self):
        for text, why in (("127.0.0.1:99999", "port"), ("[::1:2379", "']'"), ("h1:2379,,h2:2379", "empty"),
                          ("https://127.0.0.1:2379", "https://")):
            line = self.fails_in_one_line(["--endpoints", text, "get", "k"], within=5)
            self.assertIn(why, line, text)

    def test_https_to_a_plain_member(self):
        line = self.fails_in_one_line(["--endpoints", self.cluster.endpoints(), "--protocol", "https",
                                       "--timeout-ms", "3000", "get", "k"], within=8)
        self.assertIn("EtcdUnavailable", line)  # a member going down looks the same: retried
        self.assertIn("TLS handshake broke off", line)
        self.assertIn("does the member serve https?", line)

    def test_watch_on_a_closed_port(self):
        port = free_port()
        line = self.fails_in_one_line(["--endpoints", f"127.0.0.1:{port}", "--timeout-ms", "1500", "watch", "k"],
                                      within=6)
        self.assertIn(f"127.0.0.1:{port}", line)


class FailoverTest(ClusterCase):
    def test_writes_resume_after_the_leader_is_killed(self):
        leader = self.cluster.leader()
        order = [leader] + [i for i in range(self.cluster.size) if i != leader]
        client = Lines(["--endpoints", self.cluster.endpoints(order), "--timeout-ms", "15000", "loop"], stdin=True)
        try:
            k = self.prefix + "k"
            first = client.ask(f"put {k} before")
            self.assertTrue(first.startswith("ok"), first)
            self.assertEqual(fields(first)["endpoint"], self.cluster.members[leader].endpoint)
            self.cluster.kill(leader)
            killed = time.monotonic()
            answers = []
            for attempt in range(20):  # each put may take up to its 15 s deadline
                answers.append(client.ask(f"put {k} after{attempt}", timeout=30))
                if answers[-1].startswith("ok"):
                    break
            took = time.monotonic() - killed
            print(f"\nfirst successful write {took:.2f} s after SIGKILL of the leader "
                  f"({len(answers)} put(s): {answers})", flush=True)
            self.assertTrue(answers[-1].startswith("ok"), answers)
            # The client waits for the new leader instead of handing the put to
            # a follower that still follows the dead one (transport.h).
            self.assertEqual(len(answers), 1, answers)
            self.assertNotEqual(fields(answers[-1])["endpoint"], self.cluster.members[leader].endpoint)
            self.assertLess(took, 10)
            self.assertIn(self.cluster.leader(), order[1:])
        finally:
            client.close()

    def test_a_dead_first_endpoint_is_skipped(self):
        leader = self.cluster.leader()
        victim = next(i for i in range(self.cluster.size) if i != leader)
        self.cluster.kill(victim)
        rest = [i for i in range(self.cluster.size) if i != victim]
        for endpoints in (self.cluster.endpoints([victim] + rest), f"127.0.0.1:{free_port()}," + self.cluster.endpoints(rest)):
            rc, out, err = probe(["--endpoints", endpoints, "--timeout-ms", "5000", "put", self.prefix + "k", "v"])
            self.assertEqual(rc, 0, err)
            self.assertIn(fields(out)["endpoint"], [self.cluster.members[i].endpoint for i in rest])
            rc, out, err = probe(["--endpoints", endpoints, "--timeout-ms", "5000", "get", self.prefix + "k"])
            self.assertEqual(rc, 0, err)
            self.assertEqual(fields(out)["value"], "v")

    def test_watch_resumes_on_another_member_without_loss_or_repeat(self):
        n = 40
        leader = self.cluster.leader()
        target = next(i for i in range(self.cluster.size) if i != leader)
        others = [i for i in range(self.cluster.size) if i != target]
        watch = Lines(["--endpoints", self.cluster.endpoints([target] + others), "--timeout-ms", "15000",
                       "watch", self.prefix, "--prefix", "--count", str(n), "--idle-ms", "20000"])
        writer = Lines(["--endpoints", self.cluster.endpoints(others), "--timeout-ms", "15000", "loop"], stdin=True)
        try:
            created = watch.line(20)
            self.assertEqual(fields(created)["endpoint"], self.cluster.members[target].endpoint, created)
            for i in range(n):
                if i == 10:
                    self.cluster.kill(target)  # the watch's member, mid-stream
                if i == 25:
                    self.cluster.start_member(target)  # back on its data dir while writes go on
                key = f"{self.prefix}k{i:02d}"
                # Create-if-absent: a retried write can never make a second event.
                for _ in range(10):
                    answer = writer.ask(f"txn-cas {key} - v{i}", timeout=30)
                    if answer.startswith("ok succeeded") or answer.startswith(f"ok failed current=v{i}"):
                        break
                else:
                    self.fail(f"write {i}: {answer}")
                time.sleep(0.02)
            events, moves = [], []
            deadline = time.monotonic() + 60
            while len(events) < n and time.monotonic() < deadline:
                line = watch.line(max(1, deadline - time.monotonic()))
                (moves if line.startswith("connected") else events).append(line)
            keys = [e.split(" ")[1] for e in events]
            self.assertEqual(keys, [f"{self.prefix}k{i:02d}" for i in range(n)], "\n".join(events))
            revisions = [int(fields(e)["mod"]) for e in events]
            self.assertEqual(revisions, sorted(set(revisions)))
            self.assertTrue(moves, "the watch never reconnected")
            self.assertNotEqual(fields(moves[0])["endpoint"], self.cluster.members[target].endpoint)
            self.assertEqual(watch.close(), 0, "\n".join(watch.err))
            print(f"\nwatch moved {moves} and delivered {n} events once each, in order", flush=True)
        finally:
            watch.close()
            writer.close()


class TlsTest(ClusterCase):
    tls = True

    def tls_flags(self, cacert=None, cert=True, endpoints=None):
        c = self.cluster
        flags = ["--endpoints", endpoints or c.endpoints(), "--protocol", "https", "--cacert", cacert or c.ca]
        return flags + (["--cert", c.client_cert, "--key", c.client_key] if cert else [])

    def test_https_with_a_client_certificate(self):
        k = self.prefix + "k"
        self.ok("put", k, "secure")
        self.assertEqual(fields(self.ok("get", k))["value"], "secure")
        # By name: the certificate's DNS SAN is checked instead of its IP SAN.
        by_name = f"localhost:{self.cluster.members[0].client_port}"
        rc, out, err = probe(self.tls_flags(endpoints=by_name) + ["get", k])
        self.assertEqual(rc, 0, err)
        self.assertEqual(fields(out)["value"], "secure")
        first = int(fields(self.ok("get", k))["mod"])
        out = self.ok("watch", k, "--from", str(first), "--count", "1", "--idle-ms", "5000").splitlines()
        self.assertEqual(out[1].split(" mod=")[0], f"PUT {k} secure")

    def test_wrong_ca(self):
        line = self.fails_in_one_line(self.tls_flags(cacert=self.cluster.other_ca) + ["get", "k"], within=5)
        self.assertIn("EtcdTlsError", line)
        self.assertIn("TLS handshake failed: certificate verify failed", line)
        self.assertIn(f"cacert {self.cluster.other_ca}", line)

    def test_no_client_certificate(self):
        for command in (["get", "k"], ["put", "k", "v"], ["watch", "k"]):
            line = self.fails_in_one_line(self.tls_flags(cert=False) + command, within=5)
            self.assertIn("EtcdTlsError", line)
            self.assertIn("refused", line)
            self.assertIn("no client certificate", line)

    def test_plain_http_to_a_tls_member(self):
        # Retried until the deadline: a member that died after taking the
        # request would look the same.
        line = self.fails_in_one_line(["--endpoints", self.cluster.endpoints(), "--timeout-ms", "2000",
                                       "get", "k"], within=6)
        self.assertIn("EtcdUnavailable", line)
        self.assertIn("without answering (does it serve https?)", line)

    def test_tls_files_that_do_not_load(self):
        line = self.fails_in_one_line(self.tls_flags(cacert="/nonexistent/ca.pem") + ["get", "k"], within=5)
        self.assertIn("cannot load cacert /nonexistent/ca.pem", line)
        line = self.fails_in_one_line(["--endpoints", self.cluster.endpoints(), "--protocol", "https",
                                       "--cacert", self.cluster.ca, "--cert", self.cluster.client_cert, "get", "k"],
                                      within=5)
        self.assertIn("needs both cert and key", line)


class AuthTest(ClusterCase):
    """Authentication: a token from /v3/auth/authenticate, sent with every
    request and asked for again when the member no longer knows it (its TTL
    here is 1 s, etcd's default 300 s)."""
    size = 1
    extra_args = ("--auth-token-ttl", "1")

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cluster.enable_auth()

    def tearDown(self):
        pass  # nothing stops members here, and an unauthenticated health put would fail

    def flags(self, user="alice", password="alicepw"):
        return ["--endpoints", self.cluster.endpoints(), "--user", user, "--password", password]

    def test_with_credentials(self):
        k = self.prefix + "k"
        rc, out, err = probe(self.flags() + ["put", k, "v"])
        self.assertEqual(rc, 0, err)
        rc, out, err = probe(self.flags() + ["get", k])
        self.assertEqual(fields(out)["value"], "v")
        first = fields(out)["mod"]
        rc, out, err = probe(self.flags() + ["watch", k, "--from", first, "--count", "1", "--idle-ms", "5000"])
        self.assertEqual(rc, 0, err)
        self.assertTrue(out.splitlines()[1].startswith(f"PUT {k} v"), out)

    def test_token_expiry_authenticates_again(self):
        client = Lines(self.flags() + ["loop"], stdin=True)
        try:
            k = self.prefix + "k"
            self.assertTrue(client.ask(f"put {k} one").startswith("ok"))
            time.sleep(2.5)  # the token's TTL is 1 s
            answer = client.ask(f"put {k} two")
            self.assertTrue(answer.startswith("ok"), answer)
            self.assertEqual(fields(client.ask(f"get {k}"))["value"], "two")
        finally:
            client.close()

    def test_refusals_are_one_line(self):
        line = self.fails_in_one_line(["--endpoints", self.cluster.endpoints(), "get", "/k"], within=5)
        self.assertIn("EtcdAuthError", line)
        self.assertIn("requires a username and password", line)
        line = self.fails_in_one_line(self.flags(password="wrong") + ["get", "/k"], within=5)
        self.assertIn("EtcdAuthError", line)
        self.assertIn("authentication failed", line)
        line = self.fails_in_one_line(self.flags() + ["put", "outside", "v"], within=5)
        self.assertIn("EtcdAuthError", line)
        self.assertIn("permission denied", line)
        line = self.fails_in_one_line(["--endpoints", self.cluster.endpoints(), "watch", "/k"], within=5)
        self.assertIn("EtcdAuthError", line)
