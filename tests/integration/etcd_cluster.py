"""A private etcd cluster on loopback, for tests: three members by default.

Each member is an `etcd` process started here with its own client and peer
ports (harness.free_port), its own data directory in a temp dir, a cluster
token unique to this cluster and --initial-cluster-state new, so it can
never join or be joined by another cluster, the machine's own included
(scripts/install-deps.sh keeps that one stopped). Members die with the test
process (PR_SET_PDEATHSIG), and stop() kills only the pids started here.

TLS mode: a CA, a server certificate (SAN IP:127.0.0.1 and DNS:localhost)
and a client certificate are made with the openssl CLI in the temp dir, and
the members serve clients over https with --client-cert-auth: a client
without a certificate from that CA is refused. A second CA (other_ca) signs
nothing the members use, for the wrong-CA case. Peer traffic stays plain
http: it is not what the tests are about. The server certificate also
carries clientAuth because etcd 3.4's gateway dials its own gRPC port with
it, and etcd checks that usage under --client-cert-auth.

Needs the Debian packages etcd-server and etcd-client (etcd, etcdctl) and
openssl for TLS mode; unavailable() says what is missing.
"""
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
import unittest
import urllib.request
import uuid

from harness import die_with_parent, free_port, wait_for

BINARIES = ("etcd", "etcdctl")


def unavailable(tls=False):
    """Why this machine cannot run the cluster, or None when it can."""
    missing = [b for b in BINARIES + (("openssl",) if tls else ()) if shutil.which(b) is None]
    if missing:
        return "etcd test cluster: missing " + " ".join(missing) + " (scripts/install-deps.sh installs them)"
    return None


class Member:
    def __init__(self, name, client_port, peer_port, data_dir):
        self.name, self.client_port, self.peer_port, self.data_dir = name, client_port, peer_port, data_dir
        self.proc = None

    @property
    def endpoint(self):
        return f"127.0.0.1:{self.client_port}"

    def running(self):
        return self.proc is not None and self.proc.poll() is None


class EtcdCluster:
    """start() brings the members up and waits until a put succeeds;
    stop() kills every member it started. Usable as a context manager."""

    def __init__(self, size=3, tls=False, extra_args=()):
        self.size, self.tls, self.extra_args = size, tls, list(extra_args)
        self.dir = None
        self.members = []
        self.started_in = None  # seconds from start() to the first successful put
        self.token = "cxxrun-test-" + uuid.uuid4().hex

    # -- addresses and TLS files -------------------------------------------

    @property
    def scheme(self):
        return "https" if self.tls else "http"

    def endpoints(self, members=None):
        """"127.0.0.1:p1,127.0.0.1:p2,...", of `members` (indexes) in that order."""
        order = range(self.size) if members is None else members
        return ",".join(self.members[i].endpoint for i in order)

    def path(self, name):
        return os.path.join(self.dir, name)

    @property
    def ca(self):
        return self.path("ca.pem")

    @property
    def other_ca(self):
        return self.path("other-ca.pem")

    @property
    def client_cert(self):
        return self.path("client.pem")

    @property
    def client_key(self):
        return self.path("client.key")

    def client_flags(self):
        """The probe's connection flags for this cluster (TLS files included)."""
        flags = ["--endpoints", self.endpoints()]
        if self.tls:
            flags += ["--protocol", "https", "--cacert", self.ca, "--cert", self.client_cert, "--key", self.client_key]
        return flags

    # -- etcdctl -----------------------------------------------------------

    def etcdctl(self, *args, endpoints=None, timeout=20):
        argv = ["etcdctl", "--endpoints", endpoints or self.endpoints(), "--dial-timeout", "2s",
                "--command-timeout", "5s"]
        if self.tls:
            argv += ["--cacert", self.ca, "--cert", self.client_cert, "--key", self.client_key]
        env = {k: v for k, v in os.environ.items() if not k.startswith("ETCDCTL_")}
        env["ETCDCTL_API"] = "3"
        return subprocess.run(argv + list(args), env=env, capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)

    def metric(self, i, name):
        """Member i's value of the unlabelled metric `name` (0 if it has none)."""
        body = urllib.request.urlopen(f"http://{self.members[i].endpoint}/metrics", timeout=5).read().decode()
        for line in body.splitlines():
            if line.startswith(name + " "):
                return float(line.split()[1])
        return 0.0

    def metric_total(self, name):
        """The unlabelled metric `name`, summed over the members."""
        return sum(self.metric(i, name) for i in range(len(self.members)))

    def watchers(self, i):
        """How many watches member i serves now (its metrics)."""
        return int(self.metric(i, "etcd_debugging_mvcc_watcher_total"))

    def cpu_seconds(self):
        """Each member's CPU seconds so far (user + system; 0 for one not running)."""
        out = []
        for m in self.members:
            try:
                with open(f"/proc/{m.proc.pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                out.append((int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"))
            except (OSError, AttributeError):
                out.append(0.0)
        return out

    def busiest_watch_member(self):
        """The running member that serves the most watches (the agents ask the
        first member listed first; the test does not depend on it)."""
        running = [i for i, m in enumerate(self.members) if m.running()]
        return max(running, key=self.watchers)

    def statuses(self):
        """{member index: status dict} of the members that answer."""
        running = [i for i, m in enumerate(self.members) if m.running()]
        if not running:
            return {}
        p = self.etcdctl("endpoint", "status", "-w", "json", endpoints=self.endpoints(running), timeout=15)
        by_endpoint = {m.endpoint: i for i, m in enumerate(self.members)}
        out = {}
        try:
            for entry in json.loads(p.stdout or "[]"):
                host_port = entry["Endpoint"].split("://")[-1]
                out[by_endpoint[host_port]] = entry["Status"]
        except (ValueError, KeyError):
            pass
        return out

    def leader(self, timeout=15):
        """The index of the member that is leader now, by every running
        member's own status; waits (bounded) while there is none."""
        found = []

        def agreed():
            st = self.statuses()
            leaders = {s.get("leader") for s in st.values()} - {None, 0}
            ids = {s["header"]["member_id"]: i for i, s in st.items()}
            if len(leaders) == 1 and next(iter(leaders)) in ids:
                found[:] = [ids[next(iter(leaders))]]
                return True
            return False

        wait_for(agreed, timeout, "etcd test cluster: a leader")
        return found[0]

    def enable_auth(self):
        """Turns authentication on: user root (password rootpw) and user alice
        (alicepw), who may read and write every key. Stops the cluster and
        raises if etcdctl refuses a step."""
        for args in (["user", "add", "root:rootpw"], ["user", "grant-role", "root", "root"],
                     ["user", "add", "alice:alicepw"], ["role", "add", "rw"],
                     ["role", "grant-permission", "rw", "--prefix=true", "readwrite", "/"],
                     ["user", "grant-role", "alice", "rw"], ["auth", "enable"]):
            p = self.etcdctl(*args)
            if p.returncode != 0:
                self.stop()
                raise RuntimeError(f"etcdctl {args}: {p.stderr}")

    def healthy(self, members=None):
        """A put through the given members (default: all) succeeds."""
        p = self.etcdctl("put", "/cxxrun-test-health", "ok",
                         endpoints=self.endpoints(members) if members is not None else None, timeout=15)
        return p.returncode == 0

    def wait_healthy(self, members=None, timeout=30):
        wait_for(lambda: self.healthy(members), timeout, "etcd test cluster: a put to succeed")

    # -- lifecycle ---------------------------------------------------------

    def start(self, timeout=30):
        self.dir = tempfile.mkdtemp(prefix="cxxrun_etcd_")
        try:
            began = time.monotonic()
            if self.tls:
                self._make_certs()
            for i in range(self.size):
                self.members.append(Member(f"m{i}", free_port(), free_port(), self.path(f"m{i}.data")))
            for i in range(self.size):
                self.start_member(i)
            self.wait_healthy(timeout=timeout)
            self.started_in = time.monotonic() - began
        except BaseException:
            logs = self.logs()
            self.stop()
            raise RuntimeError("etcd test cluster did not come up:\n" + logs) from None
        return self

    def _argv(self, m):
        initial = ",".join(f"{x.name}=http://127.0.0.1:{x.peer_port}" for x in self.members)
        client_url = f"{self.scheme}://127.0.0.1:{m.client_port}"
        argv = ["etcd", "--name", m.name, "--data-dir", m.data_dir,
                "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                "--listen-peer-urls", f"http://127.0.0.1:{m.peer_port}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{m.peer_port}",
                "--initial-cluster", initial, "--initial-cluster-state", "new",
                "--initial-cluster-token", self.token, "--logger", "zap", "--log-outputs", "stderr"]
        if self.tls:
            argv += ["--client-cert-auth", "--trusted-ca-file", self.ca,
                     "--cert-file", self.path("server.pem"), "--key-file", self.path("server.key")]
        return argv + self.extra_args

    def start_member(self, i):
        """Starts member i (again, on its data dir after a kill or stop)."""
        m = self.members[i]
        if m.running():
            return
        log = open(self.path(f"{m.name}.log"), "a")
        m.proc = subprocess.Popen(self._argv(m), stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  preexec_fn=die_with_parent)
        log.close()

    def kill(self, i):
        """SIGKILL to member i, as a crash; returns once it is reaped."""
        m = self.members[i]
        if m.running():
            m.proc.send_signal(signal.SIGKILL)
        if m.proc is not None:
            m.proc.wait(timeout=10)

    def stop_member(self, i, timeout=10):
        """A graceful stop (SIGTERM), SIGKILL if it does not go in time."""
        m = self.members[i]
        if m.running():
            m.proc.terminate()
            try:
                m.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                m.proc.kill()
                m.proc.wait(timeout=10)

    def restart_member(self, i, timeout=30):
        """Starts member i again and waits until it serves a put itself."""
        self.start_member(i)
        self.wait_healthy(members=[i], timeout=timeout)

    def stop(self):
        for m in self.members:
            if m.proc is not None and m.proc.poll() is None:
                m.proc.kill()
            if m.proc is not None:
                try:
                    m.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    pass
        self.members = []
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def logs(self):
        """The tail of every member's log, for a failure message."""
        if not self.dir or not os.path.isdir(self.dir):
            return ""
        out = []
        for name in sorted(os.listdir(self.dir)):
            if name.endswith(".log"):
                with open(self.path(name), errors="replace") as f:
                    out.append(f"--- {name} ---\n" + f.read()[-3000:])
        return "\n".join(out)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- certificates ------------------------------------------------------

    def _openssl(self, *args):
        p = subprocess.run(["openssl"] + list(args), cwd=self.dir, capture_output=True, text=True, timeout=30,
                           stdin=subprocess.DEVNULL)
        if p.returncode != 0:
            raise RuntimeError("openssl " + " ".join(args) + ":\n" + p.stderr)

    def _ca(self, name, subject):
        self._openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-keyout", f"{name}.key", "-out", f"{name}.pem", "-days", "2", "-subj", subject,
                      "-addext", "basicConstraints=critical,CA:TRUE",
                      "-addext", "keyUsage=critical,keyCertSign,cRLSign")

    def _leaf(self, name, subject, extensions):
        with open(self.path(f"{name}.ext"), "w") as f:
            f.write(extensions)
        self._openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                      "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject)
        self._openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                      "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", f"{name}.ext")

    def _make_certs(self):
        self._ca("ca", "/CN=cxxrun etcd test CA")
        self._ca("other-ca", "/CN=cxxrun etcd test CA (not the cluster's)")
        self._leaf("server", "/CN=localhost",
                   "subjectAltName=IP:127.0.0.1,DNS:localhost\n"
                   "keyUsage=critical,digitalSignature,keyEncipherment\n"
                   "extendedKeyUsage=serverAuth,clientAuth\n")
        self._leaf("client", "/CN=cxxrun-test-client",
                   "keyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=clientAuth\n")


class ClusterTest(unittest.TestCase):
    """A cluster for the test class, started once and stopped after; the
    class is skipped, saying why, where etcd (or openssl for TLS) is
    missing."""
    tls = False
    size = 3
    extra_args = ()
    cluster = None

    @classmethod
    def setUpClass(cls):
        why = unavailable(tls=cls.tls)
        if why:
            raise unittest.SkipTest(why)
        cls.cluster = EtcdCluster(size=cls.size, tls=cls.tls, extra_args=cls.extra_args).start()
        print(f"\n{cls.__name__}: {cls.size}-member etcd cluster{' (TLS)' if cls.tls else ''} "
              f"up in {cls.cluster.started_in:.2f} s", flush=True)

    @classmethod
    def tearDownClass(cls):
        if cls.cluster:
            cls.cluster.stop()
