"""Least exposure: a job whose nodes meet on loopback listens on loopback
only (the rendezvous store, the workers' store, the health server), and no
process but the agent holds a listening socket (not a worker, not the
guardian)."""
import os
import uuid

from harness import TempDirTest, clean_env, free_port, read_pids, start, wait_for

LISTEN = "0A"


def listening_sockets():
    """{socket inode: local address} of every listening TCP socket."""
    found = {}
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        with open(table) as f:
            next(f)
            for line in f:
                fields = line.split()
                local, state, inode = fields[1], fields[3], fields[9]
                if state == LISTEN:
                    found[inode] = local.split(":")[0][:width]
    return found


def socket_inodes(pid):
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    return inodes


def is_loopback(hex_addr):
    if len(hex_addr) == 8:  # IPv4, little-endian: 127.x.x.x ends in 7F
        return hex_addr.endswith("7F")
    return hex_addr == "00000000000000000000000001000000"  # ::1


def children_of(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        return [int(p) for p in f.read().split()]


class Exposure(TempDirTest):
    def test_a_loopback_job_listens_on_loopback_only(self):
        worker = self.script("w.sh", f"echo $$ > {self.dir}/pid.$RANK\nexec sleep 30\n")
        port, job = free_port(), uuid.uuid4().hex[:8]
        agents = [start(["--rdzv-backend=c10d", f"--rdzv-endpoint=127.0.0.1:{port}",
                         f"--rdzv-id={job}", "--nnodes=2", "--nproc-per-node=1",
                         "--health-port=0", worker], env=clean_env()) for _ in range(2)]
        try:
            wait_for(lambda: len(read_pids(self.dir, "pid.")) == 2, timeout=30, what="both workers")
            listening = listening_sockets()
            held = {a.pid: socket_inodes(a.pid) & listening.keys() for a in agents}
            # The store host's agent: rendezvous store, workers' store (rank
            # 0's) and health server; the other: its health server.
            self.assertGreaterEqual(sum(len(h) for h in held.values()), 4, held)
            for pid, inodes in held.items():
                for inode in inodes:
                    self.assertTrue(is_loopback(listening[inode]),
                                    f"agent {pid} listens on {listening[inode]} (hex), not loopback")
            others = read_pids(self.dir, "pid.") + [c for a in agents for c in children_of(a.pid)]
            for pid in set(others) - {a.pid for a in agents}:
                self.assertEqual(socket_inodes(pid) & listening.keys(), set(),
                                 f"process {pid} holds a listening socket of the agent")
        finally:
            for a in agents:
                a.kill()
                a.communicate(timeout=10)
