"""A private two-node Slurm cluster on loopback, for tests.

One munged, one slurmctld and two slurmds (`slurmd -N n1`, `slurmd -N n2`)
run from a temp dir with their own slurm.conf (SLURM_CONF), ports, state,
spool and log files; nothing of the machine's own Slurm or munge is used or
touched. Both "nodes" are this machine, reached at 127.0.0.1.

Why it is configured as it is (Debian 12's Slurm 22.05):
- auth/munge with a private munged (own key and socket, AuthInfo=socket=):
  munge is what real clusters run, and a private daemon cannot clash with
  the machine's.
- ProctrackType=proctrack/linuxproc, TaskPlugin=task/none: no systemd or
  cgroup setup needed. linuxproc finds a step's processes by their parent
  chain, so a process that leaves it is cxxrun's to contain, as on a
  cluster without cgroup tracking.
- SlurmdParameters=config_overrides: the nodes may claim more CPUs than the
  machine has (both claim the same ones), so jobs with 2 tasks per node fit
  on any test machine.
- Each slurmd runs in a mount namespace of its own with a private
  /etc/hosts: the machine's, plus `127.0.0.1 n1 n2` with resolve_names
  (the default). A job step's node list names n1 and n2 and cxxrun takes
  the rendezvous host from it: names that resolve are the usual cluster,
  where node names are host names; names that do not are the cluster whose
  nodes are reached by NodeAddr only. The machine's /etc/hosts is left
  alone, and the namespace tells which processes the cluster started:
  stop() kills only those.
- KillWait is short so that scancel's SIGKILL comes within the test.

Needs root (slurmd runs steps as the submitting user, and the namespace)
and the Debian packages slurmctld, slurmd, slurm-client and munge.
"""
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

from harness import die_with_parent, free_port, wait_for

NODES = ("n1", "n2")
BINARIES = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "scancel", "sinfo", "squeue", "scontrol",
            "unshare", "mount")


def unavailable():
    """Why this machine cannot run the cluster, or None when it can."""
    if os.geteuid() != 0:
        return "needs root: slurmd starts job steps as their user and the nodes need a mount namespace"
    missing = [b for b in BINARIES if shutil.which(b) is None]
    if missing:
        return "Slurm/munge binaries missing: " + " ".join(missing) + " (scripts/install-deps.sh installs them)"
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return "cannot make a mount namespace for the nodes' /etc/hosts: " + probe.stderr.strip()
    return None


def _mount_ns(pid):
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


class SlurmCluster:
    """start() brings the cluster up and waits until both nodes are idle;
    stop() cancels its jobs and kills every process it started. Usable as a
    context manager."""

    def __init__(self, kill_wait=3, resolve_names=True):
        self.kill_wait = kill_wait
        self.resolve_names = resolve_names
        self.dir = None
        self.conf = None
        self.procs = {}  # name -> Popen, in start order
        self.node_ns = set()  # the slurmds' mount namespaces
        self.idle_after = None  # seconds from start() to both nodes idle

    # -- client side -------------------------------------------------------

    def env(self, **extra):
        """An environment for Slurm commands aimed at this cluster: no SLURM_*
        inherited from an outer job (CI may itself run under Slurm)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = self.conf
        env.update({k: str(v) for k, v in extra.items()})
        return env

    def command(self, argv, timeout=30, env=None, **kwargs):
        """Runs a Slurm client command; returns the CompletedProcess."""
        return subprocess.run(argv, env=env or self.env(), capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL, **kwargs)

    def node_states(self):
        p = self.command(["sinfo", "-h", "-N", "-o", "%N %t"], timeout=10)
        if p.returncode != 0:
            return {}
        return dict(line.split() for line in p.stdout.splitlines() if line.strip())

    def job_ids(self):
        p = self.command(["squeue", "-h", "-o", "%i"], timeout=10)
        return p.stdout.split() if p.returncode == 0 else []

    def wait_no_jobs(self, timeout=20):
        # A finished job stays in squeue as completing until its steps are gone.
        wait_for(lambda: not self.job_ids(), timeout, "slurm test cluster: the cluster's jobs to end")

    def logs(self):
        """Every daemon's log, for a failure message."""
        out = []
        for name in sorted(os.listdir(os.path.join(self.dir, "log"))):
            with open(os.path.join(self.dir, "log", name), errors="replace") as f:
                out.append(f"--- {name} ---\n" + f.read()[-3000:])
        return "\n".join(out)

    # -- lifecycle ---------------------------------------------------------

    def start(self, timeout=30):
        self.dir = tempfile.mkdtemp(prefix="cxxrun_slurm_")
        try:
            self._start(timeout)
        except BaseException:
            logs = self.logs()
            self.stop()
            raise RuntimeError("slurm test cluster did not come up:\n" + logs) from None
        return self

    def _start(self, timeout):
        started = time.monotonic()
        # munged refuses a socket in a directory others cannot enter, and
        # mkdtemp's directory is private.
        os.chmod(self.dir, 0o755)
        for sub in ("munge", "state", "log", "spool/n1", "spool/n2"):
            os.makedirs(os.path.join(self.dir, sub), mode=0o755)
        key = os.path.join(self.dir, "munge", "munge.key")
        with open(os.open(key, os.O_WRONLY | os.O_CREAT, 0o400), "wb") as f:
            f.write(os.urandom(1024))
        self.socket = os.path.join(self.dir, "munge", "socket")
        self.conf = os.path.join(self.dir, "slurm.conf")
        with open(self.conf, "w") as f:
            f.write(self._slurm_conf())
        hosts = os.path.join(self.dir, "hosts")
        with open("/etc/hosts") as src, open(hosts, "w") as dst:
            dst.write(src.read().rstrip("\n") + "\n")
            if self.resolve_names:
                dst.write("127.0.0.1 " + " ".join(NODES) + "\n")

        m = os.path.join(self.dir, "munge")
        self._spawn("munged", ["munged", "-F", f"--socket={self.socket}", f"--key-file={key}",
                               f"--pid-file={m}/munged.pid", f"--seed-file={m}/munged.seed",
                               f"--log-file={m}/munged.log"])
        wait_for(lambda: os.path.exists(self.socket), 10, "slurm test cluster: munged's socket")
        self._spawn("slurmctld", ["slurmctld", "-D", "-c", "-i", "-f", self.conf])
        for node in NODES:
            # unshare (no --fork) execs: the Popen pid is slurmd's own.
            self._spawn(f"slurmd.{node}", [
                "unshare", "--mount", "--propagation", "private", "sh", "-c",
                'mount --bind "$0" /etc/hosts && exec "$@"', hosts, "slurmd", "-D", "-N", node, "-f", self.conf])
        for node in NODES:
            pid = self.procs[f"slurmd.{node}"].pid
            wait_for(lambda: self._slurmd_running(pid), 10, f"slurm test cluster: slurmd {node} in its namespace")
            self.node_ns.add(_mount_ns(pid))
        if _mount_ns(os.getpid()) in self.node_ns:
            raise RuntimeError("the slurmds share this process's mount namespace")
        wait_for(lambda: self.node_states() == {n: "idle" for n in NODES}, timeout, "slurm test cluster: both nodes idle")
        self.idle_after = time.monotonic() - started

    def _slurmd_running(self, pid):
        proc = self.procs_by_pid().get(pid)
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"slurmd (pid {pid}) exited with {proc.returncode}")
        try:
            with open(f"/proc/{pid}/comm") as f:
                return f.read().strip().startswith("slurmd")
        except OSError:
            return False

    def procs_by_pid(self):
        return {p.pid: p for p in self.procs.values()}

    def _spawn(self, name, argv):
        out = open(os.path.join(self.dir, "log", name + ".out"), "w")
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
        env["SLURM_CONF"] = self.conf
        self.procs[name] = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env,
                                            stdin=subprocess.DEVNULL, preexec_fn=die_with_parent)
        out.close()

    def _slurm_conf(self):
        host = socket.gethostname().split(".")[0]
        d = self.dir
        ctld_port, n1_port, n2_port = free_port(), free_port(), free_port()
        return f"""# Generated by tests/integration/slurm_cluster.py: a private test cluster.
ClusterName=cxxruntest
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={n1_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={self.socket}
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd.%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd.%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/builtin
ReturnToService=2
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
KillWait={self.kill_wait}
NodeName=n1 NodeHostname={host} NodeAddr=127.0.0.1 Port={n1_port} CPUs=4 State=UNKNOWN
NodeName=n2 NodeHostname={host} NodeAddr=127.0.0.1 Port={n2_port} CPUs=4 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
"""

    def stop(self):
        """Cancels every job, then stops the daemons and whatever the nodes
        started (the processes in the slurmds' mount namespaces), by pid."""
        if self.conf and os.path.exists(self.conf) and "slurmctld" in self.procs:
            try:
                for job in self.job_ids():
                    self.command(["scancel", job], timeout=10)
                self.wait_no_jobs(timeout=10 + self.kill_wait)
            except (AssertionError, RuntimeError, subprocess.TimeoutExpired, OSError):
                pass  # the daemons and the namespaces' processes go below anyway
        for name in reversed(list(self.procs)):
            p = self.procs[name]
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)
        for pid in self.leftovers():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.procs = {}
        if self.dir:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def leftovers(self):
        """Live processes in the nodes' mount namespaces: slurmstepds and what
        they ran."""
        found = []
        for name in os.listdir("/proc"):
            if name.isdigit() and _mount_ns(name) in self.node_ns:
                found.append(int(name))
        return found

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
