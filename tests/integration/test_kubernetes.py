"""cxxrun as the container entrypoint of examples/kubernetes/: each manifest's
pods run as agents on loopback with the environment its operator gives them
and the container's own command line (docs/torchrun-compat.md, "Kubernetes").

The environment comes from the manifest through the operator's rules, written
out below (training operator for PyTorchJob; Trainer v2's torch runtime for
TrainJob), so a manifest and what the operator makes of it are tested
together. Two things differ from a cluster: the port is a free one, and the
pods share a host. Pod host names resolve to 127.0.0.1 through a private
/etc/hosts in a mount namespace of each agent's own (root); without root
they are replaced by "localhost" in the environment.
"""
import os
import shutil
import subprocess
import unittest

import yaml

from harness import CXXRUN, EXAMPLES, TempDirTest, finish_all, free_port

MANIFESTS = os.path.join(os.path.dirname(__file__), "../../examples/kubernetes")
IMAGE_PROGRAM = "/usr/local/bin/train"  # where the manifests' image holds the trainer
TIMEOUT = 120


def load(name):
    with open(os.path.join(MANIFESTS, name)) as f:
        return yaml.safe_load(f)


def pytorchjob_pods(job, port):
    """[(pod name, env, command)] as the training operator (kubeflow.org/v1)
    sets them: the container's env first, the operator's after (later wins)."""
    spec, name = job["spec"], job["metadata"]["name"]
    replicas = spec["pytorchReplicaSpecs"]
    total = sum(r["replicas"] for r in replicas.values())
    nproc = spec.get("nprocPerNode")
    elastic = spec.get("elasticPolicy")
    pods = []
    for kind in ("Master", "Worker"):
        for index in range(replicas.get(kind, {}).get("replicas", 0)):
            container = replicas[kind]["template"]["spec"]["containers"][0]
            env = {e["name"]: e["value"] for e in container.get("env", [])}
            env["PYTHONUNBUFFERED"] = "0"
            if "Master" in replicas:
                rank = index + (1 if kind == "Worker" else 0)
                env.update(MASTER_PORT=str(port), MASTER_ADDR=f"{name}-master-0",
                           WORLD_SIZE=str(total * (int(nproc) if str(nproc).isdigit() else 1)), RANK=str(rank),
                           PET_NPROC_PER_NODE=str(nproc), PET_NODE_RANK=str(rank))
            if elastic:
                env["PET_RDZV_ENDPOINT"] = f"{name}-worker-0:{port}"
                env["PET_RDZV_BACKEND"] = elastic.get("rdzvBackend", "c10d")
                if "minReplicas" in elastic or "maxReplicas" in elastic:
                    env["PET_NNODES"] = f"{elastic['minReplicas']}:{elastic['maxReplicas']}"
                else:
                    env["PET_NNODES"] = str(replicas["Worker"]["replicas"])
                for key, var in (("maxRestarts", "PET_MAX_RESTARTS"), ("nProcPerNode", "PET_NPROC_PER_NODE"),
                                 ("rdzvId", "PET_RDZV_ID")):
                    if key in elastic:
                        env[var] = str(elastic[key])
                if "rdzvConf" in elastic:
                    env["PET_RDZV_CONF"] = ",".join(f"{c['key']}={c['value']}" for c in elastic["rdzvConf"])
                if elastic.get("standalone"):
                    env["PET_STANDALONE"] = ""
            else:
                env["PET_NNODES"] = str(total)
            pods.append((f"{name}-{kind.lower()}-{index}", env, container["command"] + container.get("args", [])))
    return pods


def trainjob_pods(job, port):
    """[(pod name, env, command)] as Trainer v2's torch runtime sets them for
    a TrainJob without GPUs: one worker per CPU the node requests."""
    name, trainer = job["metadata"]["name"], job["spec"]["trainer"]
    nodes = trainer["numNodes"]
    nproc = trainer.get("numProcPerNode", int(trainer["resourcesPerNode"]["requests"]["cpu"]))
    pods = []
    for index in range(nodes):
        env = {"PET_NNODES": str(nodes), "PET_NPROC_PER_NODE": str(nproc), "PET_NODE_RANK": str(index),
               "JOB_COMPLETION_INDEX": str(index), "PET_MASTER_ADDR": f"{name}-node-0-0.{name}",
               "PET_MASTER_PORT": str(port)}
        pods.append((f"{name}-node-0-{index}", env, trainer["command"] + trainer.get("args", [])))
    return pods


def private_hosts_usable():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "true"], capture_output=True, timeout=30)
    return probe.returncode == 0


class Kubernetes(TempDirTest):
    @classmethod
    def setUpClass(cls):
        cls.named = private_hosts_usable()

    @staticmethod
    def host_names(pods):
        """The pods' names and every host a pod's environment names, longest
        first (so replacing them never cuts one short)."""
        names = {name for name, _, _ in pods}
        for _, env, _ in pods:
            names.update(env[v] for v in ("MASTER_ADDR", "PET_MASTER_ADDR") if v in env)
            if "PET_RDZV_ENDPOINT" in env:
                names.add(env["PET_RDZV_ENDPOINT"].rsplit(":", 1)[0])
        return sorted(names, key=len, reverse=True)

    def run_pods(self, pods):
        """Starts every pod's command as its container would, each in a
        directory of its own; returns [(rc, out, err)]."""
        names = self.host_names(pods)
        hosts = os.path.join(self.dir, "hosts")
        with open("/etc/hosts") as src, open(hosts, "w") as dst:
            dst.write(src.read() + "\n127.0.0.1 " + " ".join(names) + "\n")
        procs = []
        for name, env, command in pods:
            self.assertEqual(command[0], "cxxrun", name)
            argv = [CXXRUN] + [os.path.join(EXAMPLES, "train") if a == IMAGE_PROGRAM else a for a in command[1:]]
            if self.named:
                argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        'mount --bind "$0" /etc/hosts && exec "$@"', hosts] + argv
            else:
                for host in names:
                    env = {k: v.replace(host, "localhost") for k, v in env.items()}
            full_env = {k: v for k, v in os.environ.items() if not k.startswith(("PET_", "TORCHELASTIC_", "SLURM_"))}
            for k in ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"):
                full_env.pop(k, None)
            full_env.update(env)
            cwd = os.path.join(self.dir, name)
            os.makedirs(cwd)
            procs.append(subprocess.Popen(argv, env=full_env, cwd=cwd, stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL))
        return finish_all(self, procs, TIMEOUT)

    def check_one_job(self, results, ranks):
        for rc, out, err in results:
            self.assertEqual(rc, 0, err)
        output = "".join(out for _, out, _ in results)
        self.assertIn(f"on {ranks} rank(s)", output)

    def test_pytorchjob_elastic(self):
        pods = pytorchjob_pods(load("pytorchjob-elastic.yaml"), free_port())
        self.assertEqual(pods[0][1]["PET_RDZV_BACKEND"], "c10d")
        self.check_one_job(self.run_pods(pods), 4)

    def test_pytorchjob_master_and_worker(self):
        pods = pytorchjob_pods(load("pytorchjob.yaml"), free_port())
        self.assertNotIn("PET_MASTER_ADDR", pods[1][1])
        results = self.run_pods(pods)
        self.check_one_job(results, 4)
        for _, _, err in results:
            self.assertIn("from MASTER_ADDR and --master-port=", err)

    def test_trainjob(self):
        pods = trainjob_pods(load("trainjob.yaml"), free_port())
        self.check_one_job(self.run_pods(pods), 4)

    def test_pytorchjob_standalone(self):
        # elasticPolicy.standalone: one pod, PET_STANDALONE="" (torchrun
        # fails to read it; cxxrun takes it as on).
        job = load("pytorchjob-elastic.yaml")
        policy = job["spec"]["elasticPolicy"]
        policy["standalone"] = True
        del policy["minReplicas"], policy["maxReplicas"]  # PET_NNODES: the one replica
        job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 1
        pods = pytorchjob_pods(job, free_port())
        self.assertEqual(pods[0][1]["PET_STANDALONE"], "")
        self.check_one_job(self.run_pods(pods), 2)


if __name__ == "__main__":
    unittest.main()
