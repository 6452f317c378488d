"""Hosts as network namespaces, each with a real sshd, for cxxrun --hostfile
(test_hostfile_netns.py, bench/hostfile_launch.py).

A bridge in a namespace of its own (the launcher's) joins a veth from each
host's namespace; every address is in SUBNET/24, which nothing else uses.
Keys are made here: a host key per sshd, one client key, authorized_keys,
all in the caller's directory. Nothing is changed outside the namespaces but
/run/sshd (sshd's privilege separation directory), made when missing."""
import os
import shutil
import signal
import subprocess
import time
import uuid

SUBNET = "10.213.44"
SSHD = "/usr/sbin/sshd"

SSHD_CONFIG = """ListenAddress {ip}
Port 22
HostKey {dir}/host_key_{i}
PidFile {dir}/sshd_{i}.pid
AuthorizedKeysFile {dir}/authorized_keys
UsePAM no
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UseDNS no
LogLevel ERROR
"""


def sh(*args, timeout=30):
    return subprocess.run(list(args), capture_output=True, text=True, timeout=timeout)


def missing():
    """Why these hosts cannot be made here, or None."""
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("ip", "ssh", "ssh-keygen"):
        if not shutil.which(tool):
            return f"needs {tool}"
    if not os.access(SSHD, os.X_OK):
        return "needs sshd (openssh-server)"
    probe = f"cxh_probe_{os.getpid()}"
    if sh("ip", "netns", "add", probe).returncode != 0:
        return "needs ip netns"
    sh("ip", "netns", "del", probe)
    return None


def _die_with_parent():
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


class Hosts:
    """`count` hosts; those in `without_sshd` (indexes) run no sshd."""

    def __init__(self, directory, count=3, without_sshd=()):
        self.dir = directory
        tag = uuid.uuid4().hex[:6]
        self.launcher_ns = f"cxh{tag}L"
        self.ns = [f"cxh{tag}{i}" for i in range(count)]
        self.ips = [f"{SUBNET}.{i + 1}" for i in range(count)]
        self.launcher_ip = f"{SUBNET}.254"
        self.sshd = {}  # index -> Popen
        self.made = []
        try:
            self._network(tag)
            self._keys(count)
            for i in range(count):
                if i not in without_sshd:
                    self._start_sshd(i)
            for i in self.sshd:
                self._wait_for_ssh(i)
        except BaseException:
            self.close()
            raise

    def _run(self, *args):
        r = sh(*args)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(args)}: {r.stderr.strip()}")

    def _network(self, tag):
        for ns in [self.launcher_ns] + self.ns:
            self._run("ip", "netns", "add", ns)
            self.made.append(ns)
            self._run("ip", "netns", "exec", ns, "ip", "link", "set", "lo", "up")
        L = ("ip", "netns", "exec", self.launcher_ns)
        bridge = f"br{tag}"
        self._run(*L, "ip", "link", "add", bridge, "type", "bridge")
        self._run(*L, "ip", "addr", "add", f"{self.launcher_ip}/24", "dev", bridge)
        self._run(*L, "ip", "link", "set", bridge, "up")
        for i, (ns, ip) in enumerate(zip(self.ns, self.ips)):
            outer, inner = f"v{tag}{i}o", f"v{tag}{i}i"
            self._run("ip", "link", "add", outer, "netns", self.launcher_ns, "type", "veth", "peer", "name", inner,
                      "netns", ns)
            self._run(*L, "ip", "link", "set", outer, "master", bridge)
            self._run(*L, "ip", "link", "set", outer, "up")
            self._run("ip", "netns", "exec", ns, "ip", "addr", "add", f"{ip}/24", "dev", inner)
            self._run("ip", "netns", "exec", ns, "ip", "link", "set", inner, "up")

    def _keys(self, count):
        self.key = os.path.join(self.dir, "client_key")
        self._run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", self.key)
        shutil.copy(self.key + ".pub", os.path.join(self.dir, "authorized_keys"))
        for i in range(count):
            self._run("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", os.path.join(self.dir, f"host_key_{i}"))
        os.makedirs("/run/sshd", mode=0o755, exist_ok=True)

    def _start_sshd(self, i):
        config = os.path.join(self.dir, f"sshd_config_{i}")
        with open(config, "w") as f:
            f.write(SSHD_CONFIG.format(ip=self.ips[i], dir=self.dir, i=i))
        log = open(os.path.join(self.dir, f"sshd_{i}.log"), "w")
        self.sshd[i] = subprocess.Popen(["ip", "netns", "exec", self.ns[i], SSHD, "-D", "-e", "-f", config],
                                        stdout=log, stderr=log, stdin=subprocess.DEVNULL,
                                        preexec_fn=_die_with_parent)
        log.close()

    @property
    def rsh(self):
        return (f"ssh -F /dev/null -i {self.key} -o UserKnownHostsFile=/dev/null -o StrictHostKeyChecking=no "
                "-o BatchMode=yes -o LogLevel=ERROR -o ConnectTimeout=10")

    def in_launcher_ns(self, argv):
        return ["ip", "netns", "exec", self.launcher_ns] + list(argv)

    def _wait_for_ssh(self, i, timeout=30):
        deadline = time.monotonic() + timeout
        while True:
            r = sh(*self.in_launcher_ns(self.rsh.split() + [self.ips[i], "true"]))
            if r.returncode == 0:
                return
            if time.monotonic() > deadline or self.sshd[i].poll() is not None:
                with open(os.path.join(self.dir, f"sshd_{i}.log")) as f:
                    raise RuntimeError(f"sshd on {self.ips[i]} does not answer: {r.stderr.strip()} {f.read()}")
            time.sleep(0.2)

    def pids(self, i):
        """Every process in host i's network namespace."""
        r = sh("ip", "netns", "pids", self.ns[i])
        return {int(p) for p in r.stdout.split()}

    def left_behind(self, i):
        """Processes in host i's namespace other than its listening sshd."""
        keep = {self.sshd[i].pid} if i in self.sshd else set()
        return self.pids(i) - keep

    def net_ns_id(self, i):
        return sh("ip", "netns", "exec", self.ns[i], "readlink", "/proc/self/ns/net").stdout.strip()

    def close(self):
        for p in self.sshd.values():
            if p.poll() is None:
                p.kill()
            p.wait(timeout=10)
        for ns in self.ns:
            for pid in (self._ns_pids(ns) if ns in self.made else ()):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for ns in reversed(self.made):  # the launcher's last: its bridge and veth ends go with it
            sh("ip", "netns", "del", ns)
        self.made = []

    def _ns_pids(self, ns):
        r = sh("ip", "netns", "pids", ns)
        return {int(p) for p in r.stdout.split()}
