"""cxxrun's exit codes as the schedulers' examples act on them
(docs/exit-codes.md):

- examples/kubernetes/podfailurepolicy-job.yaml: its podFailurePolicy,
  checked as the API server checks it and evaluated as the Job controller
  evaluates it (rules in order, the first match acts), for every code
  cxxrun gives and for codes the real cxxrun gives here (a hang, bad input,
  a worker killed by an admin); its container's command runs here as the
  pod would run it.
- examples/slurm/requeue.sbatch on the suite's two-node Slurm
  (slurm_cluster.py): a job whose worker hangs is requeued once and then
  completes; a job whose program fails on its own is not requeued. Its
  decision for every code (245 never requeued, even beside a node's 243)
  runs without a cluster, with stand-ins for srun and scontrol.
"""
import os
import re
import subprocess
import unittest

import yaml

import slurm_cluster
import test_slurm
from harness import CXXRUN, EXAMPLES, TempDirTest, clean_env

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
MANIFEST = os.path.join(REPO, "examples/kubernetes/podfailurepolicy-job.yaml")
REQUEUE_SBATCH = os.path.join(REPO, "examples/slurm/requeue.sbatch")
IMAGE_PROGRAM = "/usr/local/bin/train"  # where the manifest's image holds the trainer
DEMO = os.path.join(EXAMPLES, "heartbeat_demo")

# The contract (agent/exit_codes.h).
HANG, OOM, UNKILLABLE, NODE_UNHEALTHY, LOST, NO_PROGRESS = 240, 241, 242, 243, 244, 245
USAGE, RENDEZVOUS_FAILED = 2, 1


# -- Kubernetes' podFailurePolicy ---------------------------------------------

class Invalid(Exception):
    """What the API server would refuse the Job with."""


ACTIONS = ("FailJob", "FailIndex", "Ignore", "Count")


def validate(job):
    """The API server's checks of spec.podFailurePolicy (batch/v1
    validation): raises Invalid naming the first problem."""
    spec = job["spec"]
    policy = spec.get("podFailurePolicy")
    if policy is None:
        return
    pod = spec["template"]["spec"]
    if pod.get("restartPolicy") != "Never":
        raise Invalid("podFailurePolicy needs template.spec.restartPolicy: Never")
    names = [c["name"] for c in pod.get("containers", []) + pod.get("initContainers", [])]
    rules = policy.get("rules", [])
    if len(rules) > 20:
        raise Invalid("at most 20 rules")
    for i, rule in enumerate(rules):
        where = f"rules[{i}]"
        if rule.get("action") not in ACTIONS:
            raise Invalid(f"{where}.action: {rule.get('action')!r} is not one of {ACTIONS}")
        if rule["action"] == "FailIndex" and spec.get("backoffLimitPerIndex") is None:
            raise Invalid(f"{where}: FailIndex needs backoffLimitPerIndex")
        if ("onExitCodes" in rule) == ("onPodConditions" in rule):
            raise Invalid(f"{where}: exactly one of onExitCodes and onPodConditions")
        if "onExitCodes" in rule:
            req = rule["onExitCodes"]
            if "containerName" in req and req["containerName"] not in names:
                raise Invalid(f"{where}.onExitCodes.containerName: no container {req['containerName']!r}")
            if req.get("operator") not in ("In", "NotIn"):
                raise Invalid(f"{where}.onExitCodes.operator: {req.get('operator')!r}")
            values = req.get("values") or []
            if not values or len(values) > 255 or not all(type(v) is int for v in values):
                raise Invalid(f"{where}.onExitCodes.values: 1 to 255 integers")
            if any(b <= a for a, b in zip(values, values[1:])):
                raise Invalid(f"{where}.onExitCodes.values: must be ordered, without duplicates")
            if req["operator"] == "In" and 0 in values:
                raise Invalid(f"{where}.onExitCodes.values: 0 cannot be used with In")
        else:
            patterns = rule["onPodConditions"]
            if not patterns:
                raise Invalid(f"{where}.onPodConditions: at least one pattern")
            for p in patterns:
                if not p.get("type") or p.get("status", "True") not in ("True", "False", "Unknown"):
                    raise Invalid(f"{where}.onPodConditions: {p!r}")


def _exit_codes_match(req, containers):
    """A terminated container, not 0, that the requirement matches
    (Kubernetes' matchOnExitCodes: app containers, then init containers)."""
    for c in containers:
        code = c.get("exitCode")
        if code is None or code == 0:  # still running, or succeeded: never matched
            continue
        if "containerName" in req and req["containerName"] != c["name"]:
            continue
        if req["operator"] == "In" and code in req["values"]:
            return True
        if req["operator"] == "NotIn" and code not in req["values"]:
            return True
    return False


def evaluate(policy, containers, conditions=(), init_containers=()):
    """What the Job controller does with a failed pod (matchPodFailurePolicy):
    (action, rule index); ("Count", None) when no rule matches. `containers`
    are {"name", "exitCode"}, `conditions` {"type", "status"}."""
    for i, rule in enumerate(policy.get("rules", [])):
        if "onExitCodes" in rule:
            req = rule["onExitCodes"]
            matched = _exit_codes_match(req, containers) or _exit_codes_match(req, init_containers)
        else:
            matched = any(c["type"] == p["type"] and c.get("status", "True") == p.get("status", "True")
                          for c in conditions for p in rule["onPodConditions"])
        if matched:
            return rule["action"], i
    return "Count", None


def load_job():
    with open(MANIFEST) as f:
        return yaml.safe_load(f)


def main_container(job):
    return job["spec"]["template"]["spec"]["containers"][0]


def outcome(job, code, conditions=()):
    """What becomes of the Job when its pod's container ends with `code`:
    "Succeeded" for 0 (a pod that succeeds never meets the rules), else the
    policy's action."""
    if code == 0:
        return "Succeeded"
    action, _ = evaluate(job["spec"]["podFailurePolicy"], [{"name": main_container(job)["name"], "exitCode": code}],
                         conditions)
    return action


class PodFailurePolicy(TempDirTest):
    """The manifest's rules, with the codes of the contract and with codes
    the real cxxrun gives."""

    def setUp(self):
        super().setUp()
        self.job = load_job()

    def test_the_api_server_would_take_it(self):
        validate(self.job)
        spec = self.job["spec"]
        self.assertEqual(self.job["apiVersion"], "batch/v1")
        self.assertEqual(self.job["kind"], "Job")
        self.assertIsInstance(spec["backoffLimit"], int)
        for rule in spec["podFailurePolicy"]["rules"]:
            if "onExitCodes" in rule:
                self.assertNotIn(0, rule["onExitCodes"]["values"], "0 is success: no rule may name it")

    def test_the_validator_refuses_what_kubernetes_refuses(self):
        # The checks above are worth something only if they fail.
        def broken(change):
            job = load_job()
            change(job)
            with self.assertRaises(Invalid):
                validate(job)

        rules = lambda job: job["spec"]["podFailurePolicy"]["rules"]
        exit_rule = lambda job: next(r for r in rules(job) if "onExitCodes" in r)["onExitCodes"]
        broken(lambda job: job["spec"]["template"]["spec"].update(restartPolicy="OnFailure"))
        broken(lambda job: exit_rule(job).update(values=[0, 2]))
        broken(lambda job: exit_rule(job).update(values=[241, 2]))
        broken(lambda job: exit_rule(job).update(containerName="nope"))
        broken(lambda job: rules(job)[0].update(action="Retry"))
        broken(lambda job: rules(job)[0].update(action="FailIndex"))

    def test_each_code_of_the_contract(self):
        expected = {
            0: "Succeeded",
            USAGE: "FailJob",  # bad input never gets better
            OOM: "FailJob",  # the same memory request fails again
            NO_PROGRESS: "FailJob",  # cxxrun's final verdict: failures repeat without progress
            UNKILLABLE: "Ignore",  # the node's fault: retried, not counted
            NODE_UNHEALTHY: "Ignore",
            HANG: "Count",  # retried, counted
            LOST: "Count",
            RENDEZVOUS_FAILED: "Count",  # no rule: counted
            137: "Count",  # a worker killed by an admin's kill -9: the user's failure
            139: "Count",  # a worker's segfault
            3: "Count",  # the program's own exit code
            127: "Count",  # a worker could not be executed
            130: "Count",  # the agent got SIGINT
        }
        for code, action in expected.items():
            with self.subTest(code=code):
                self.assertEqual(outcome(self.job, code), action)

    def test_a_disrupted_pod_is_ignored_whatever_its_code(self):
        # Eviction or preemption: SIGTERM to the agent, which exits 143.
        disrupted = [{"type": "DisruptionTarget", "status": "True"}]
        for code in (143, HANG, OOM, USAGE):
            with self.subTest(code=code):
                self.assertEqual(outcome(self.job, code, disrupted), "Ignore")
        self.assertEqual(outcome(self.job, 143, [{"type": "DisruptionTarget", "status": "False"}]), "Count")

    def test_evaluator_semantics(self):
        # Kubernetes' own rules, on a policy of the test's: the first match
        # acts, NotIn, containerName, init containers, exit 0 never matches.
        policy = {"rules": [
            {"action": "Ignore", "onExitCodes": {"containerName": "side", "operator": "In", "values": [5]}},
            {"action": "FailJob", "onExitCodes": {"operator": "In", "values": [5, 6]}},
            {"action": "Count", "onExitCodes": {"operator": "In", "values": [6]}},
            {"action": "FailIndex", "onExitCodes": {"operator": "NotIn", "values": [1, 7]}},
        ]}
        self.assertEqual(evaluate(policy, [{"name": "main", "exitCode": 5}]), ("FailJob", 1))
        self.assertEqual(evaluate(policy, [{"name": "side", "exitCode": 5}]), ("Ignore", 0))
        self.assertEqual(evaluate(policy, [{"name": "main", "exitCode": 6}]), ("FailJob", 1))
        self.assertEqual(evaluate(policy, [{"name": "main", "exitCode": 9}]), ("FailIndex", 3))
        self.assertEqual(evaluate(policy, [{"name": "main", "exitCode": 7}]), ("Count", None))
        self.assertEqual(evaluate(policy, [{"name": "main", "exitCode": 0}]), ("Count", None))
        self.assertEqual(evaluate(policy, [{"name": "main", "exitCode": 7}, {"name": "side", "exitCode": 5}]),
                         ("Ignore", 0))
        self.assertEqual(evaluate(policy, [{"name": "main", "exitCode": 7}], init_containers=[
            {"name": "init", "exitCode": 6}]), ("FailJob", 1))
        self.assertEqual(evaluate(policy, [{"name": "main"}]), ("Count", None))  # not terminated

    # -- the real cxxrun --------------------------------------------------

    def container_command(self, **replace):
        """The container command's arguments for this machine (self.cxxrun()
        gives them to our cxxrun): the trainer built here for the image's, and the
        arguments in `replace` replaced."""
        command = main_container(self.job)["command"]
        self.assertEqual(command[0], "cxxrun")
        return [os.path.join(EXAMPLES, "train") if a == IMAGE_PROGRAM else replace.get(a, a) for a in command[1:]]

    def cxxrun(self, args, timeout=60):
        """cxxrun `args` in the test's directory, as a container in its
        working directory (the trainer writes checkpoints/ there)."""
        p = subprocess.run([CXXRUN] + list(args), env=clean_env(), cwd=self.dir, capture_output=True, text=True,
                           timeout=timeout, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr

    def test_the_container_command_runs(self):
        # cxxrun has no dry run: the pod's command runs as it would in the
        # pod, on loopback, with the trainer built here.
        rc, out, err = self.cxxrun(self.container_command(), timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertIn("on 2 rank(s)", out)
        self.assertEqual(outcome(self.job, rc), "Succeeded")

    def test_bad_input_fails_the_job(self):
        rc, out, err = self.cxxrun(self.container_command(**{"--nproc-per-node=2": "--nproc-per-node=two"}))
        self.assertEqual(rc, USAGE, err)
        self.assertIn("cxxrun: error: ", err)
        self.assertEqual(outcome(self.job, rc), "FailJob")

    def test_a_hang_is_retried_and_counted(self):
        # Local rank 1 beats three times, then stops: cxxrun's heartbeat
        # timeout kills it, and no restarts are left.
        worker = self.script("hang.sh", f"""
[ "$LOCAL_RANK" = 1 ] && exec {DEMO} --steps 1000 --hang-at 3 --timeout 600
exec {DEMO} --steps 1000 --timeout 600
""")
        rc, out, err = self.cxxrun(["--nproc-per-node=2", "--heartbeat-timeout=1", worker], timeout=60)
        self.assertIn("worker hung: local rank 1: no heartbeat", err)
        self.assertEqual(rc, HANG, err)
        self.assertEqual(outcome(self.job, rc), "Count")

    def test_an_admins_kill_is_the_users_failure(self):
        # SIGKILL that cxxrun did not send: 128 + 9, as a shell says it.
        worker = self.script("killed.sh", '[ "$LOCAL_RANK" = 1 ] && kill -KILL $$\nsleep 30\n')
        rc, out, err = self.cxxrun(["--nproc-per-node=2", worker], timeout=60)
        self.assertEqual(rc, 137, err)
        self.assertEqual(outcome(self.job, rc), "Count")


# -- Slurm: examples/slurm/requeue.sbatch -------------------------------------

class RequeueDecision(TempDirTest):
    """The script's decision for each code, without a cluster: `srun` and
    `scontrol` on its PATH are stand-ins (srun exits with the code given and
    says on stderr what srun would of each node; scontrol records its
    arguments), so every code, and codes of several nodes, can be tried."""

    def decide(self, code, srun_says=""):
        """(exit status, the script's last line, scontrol's calls)."""
        bin_dir = os.path.join(self.dir, "bin")
        os.makedirs(bin_dir, exist_ok=True)
        calls = os.path.join(self.dir, "scontrol.calls")
        for name, body in (("srun", 'printf "%b" "$FAKE_SRUN_SAYS" >&2\nexit "$FAKE_SRUN_RC"\n'),
                           ("scontrol", f'echo "$*" >> {calls}\n'
                                        '[ "$1 $2" = "show job" ] && echo "JobId=$3 ExcNodeList=(null)"\nexit 0\n')):
            with open(os.path.join(bin_dir, name), "w") as f:
                f.write("#!/bin/bash\n" + body)
            os.chmod(os.path.join(bin_dir, name), 0o755)
        env = clean_env(PATH=f"{bin_dir}:/usr/bin:/bin", SLURM_JOB_ID="7", SLURM_JOB_NODELIST="n[1-2]",
                        FAKE_SRUN_RC=code, FAKE_SRUN_SAYS=srun_says)
        env.pop("SLURM_RESTART_COUNT", None)
        p = subprocess.run(["bash", REQUEUE_SBATCH], env=env, cwd=self.dir, capture_output=True, text=True,
                           timeout=60)
        made = []
        if os.path.exists(calls):
            with open(calls) as f:
                made = f.read().splitlines()
            os.remove(calls)
        return p.returncode, p.stdout.strip().splitlines()[-1], made

    def test_each_code(self):
        for code in (HANG, LOST):
            with self.subTest(code=code):
                self.assertEqual(self.decide(code), (code, f"requeue.sbatch: cxxrun exited {code}: requeued",
                                                     ["requeue 7"]))
        for code in (OOM, NO_PROGRESS, USAGE, RENDEZVOUS_FAILED, 3, 139):
            with self.subTest(code=code):
                self.assertEqual(self.decide(code), (code, f"requeue.sbatch: cxxrun exited {code}: not requeued", []))

    def test_a_bad_node_is_requeued_without(self):
        says = f"srun: error: n2: task 1: Exited with exit code {NODE_UNHEALTHY}\\n"
        self.assertEqual(self.decide(NODE_UNHEALTHY, says),
                         (NODE_UNHEALTHY, "requeue.sbatch: cxxrun exited 243: requeued without n2",
                          ["show job 7", "requeue 7", "update JobId=7 ExcNodeList=n2"]))

    def test_245_is_final_whatever_another_node_said(self):
        # srun exits with the highest code of its tasks: one node's verdict
        # (245) above another's step-out (243) still ends the job.
        says = (f"srun: error: n1: task 0: Exited with exit code {NO_PROGRESS}\\n"
                f"srun: error: n2: task 1: Exited with exit code {NODE_UNHEALTHY}\\n")
        self.assertEqual(self.decide(NO_PROGRESS, says),
                         (NO_PROGRESS, "requeue.sbatch: cxxrun exited 245: not requeued", []))


# A requeued job may start again only once its credentials have expired
# (AuthInfo's cred_expire, 120 s by default) and the scheduler next looks
# (sched_interval, 60 s): this cluster shortens both, nothing else.
CRED_EXPIRE = 5
SCHED_INTERVAL = 1
JOB_TIMEOUT = 120  # one sbatch --wait, requeue included; it polls at 2, 10, 42, 74 s...


class RequeueCluster(slurm_cluster.SlurmCluster):
    def _slurm_conf(self):
        conf = super()._slurm_conf()
        auth = f"AuthInfo=socket={self.socket}"
        if f"\n{auth}\n" not in conf:
            raise RuntimeError(f"slurm_cluster.py's slurm.conf has no line {auth}")
        return (conf.replace(f"\n{auth}\n", f"\n{auth},cred_expire={CRED_EXPIRE}\n")
                + f"SchedulerParameters=sched_interval={SCHED_INTERVAL}\n")


class SlurmRequeue(test_slurm.SlurmCase):
    """The script on a real two-node Slurm, as test_slurm.py runs
    train.sbatch: `cxxrun` on the job's PATH is the real one ("auto") where
    this build reads Slurm's environment, else test_slurm's wrapper."""

    @classmethod
    def setUpClass(cls):
        # test_slurm.SlurmCase's, with the cluster above.
        reason = slurm_cluster.unavailable()
        if reason:
            raise unittest.SkipTest(reason)
        cls.auto = test_slurm.slurm_aware()
        cls.cluster = RequeueCluster(kill_wait=3, resolve_names=cls.resolve_names).start()
        print(f"\n{cls.__name__}: slurm test cluster idle after {cls.cluster.idle_after:.2f}s", flush=True)

    def sbatch(self, train, **env):
        """sbatch --wait requeue.sbatch with TRAIN=train; returns (rc, the
        job's output, its `scontrol show job` fields)."""
        mode = self.modes()[-1]  # one mode: the script is under test here, not the launcher
        output = os.path.join(self.dir, "job.out")
        try:
            p = self.cluster.command(["sbatch", "--wait", f"--output={output}", REQUEUE_SBATCH], timeout=JOB_TIMEOUT,
                                     env=self.env(mode, TRAIN=train, **env), cwd=self.dir)
        except subprocess.TimeoutExpired:
            self.fail(f"sbatch --wait still running after {JOB_TIMEOUT}s:\n{self.cluster.logs()}")
        with open(output) as f:
            log = f.read()
        job = re.search(r"Submitted batch job (\d+)", p.stdout)
        self.assertIsNotNone(job, f"{p.stdout}\n{p.stderr}")
        show = self.cluster.command(["scontrol", "-o", "show", "job", job.group(1)], timeout=10).stdout
        fields = dict(kv.split("=", 1) for kv in show.split() if "=" in kv)
        return p.returncode, log, fields

    def test_a_hang_is_requeued_and_the_second_run_completes(self):
        # Rank 1 beats, then stops on the first run (SLURM_RESTART_COUNT
        # unset): cxxrun exits 240 and the script requeues the job; on the
        # second every rank finishes. The program takes no trainer arguments.
        out = self.out
        train = self.script("train.sh", f"""
run=${{SLURM_RESTART_COUNT:-0}}
touch {out}/ran.$run.$RANK
if [ "$run" = 0 ]; then
  [ "$RANK" = 1 ] && exec {DEMO} --steps 1000 --hang-at 3 --timeout 600
  exec {DEMO} --steps 1000 --timeout 600
fi
exec {DEMO} --steps 3
""")
        rc, log, job = self.sbatch(train, CXXRUN_ARGS="--heartbeat-timeout=1")
        self.assertEqual(rc, 0, log)
        self.assertIn("run 1 on", log)
        self.assertIn("worker hung: local rank 1: no heartbeat", log)
        # Both nodes' agents give the job's code, not only the hung worker's.
        self.assertEqual(sorted(re.findall(r"srun: error: (n\d): task \d: Exited with exit code 240", log)),
                         ["n1", "n2"], log)
        self.assertIn("cxxrun exited 240: requeued", log)
        self.assertIn("run 2 on", log)
        self.assertNotIn("run 3 on", log)
        self.assertEqual(sorted(os.listdir(out)), [f"ran.{run}.{rank}" for run in (0, 1) for rank in range(4)])
        self.assertEqual((job.get("JobState"), job.get("Restarts"), job.get("ExitCode")), ("COMPLETED", "1", "0:0"),
                         log)

    def test_the_programs_own_failure_is_not_requeued(self):
        train = self.script("train.sh", f"touch {self.out}/ran.${{SLURM_RESTART_COUNT:-0}}.$RANK\nexit 3\n")
        rc, log, job = self.sbatch(train)
        self.assertEqual(rc, 3, log)
        self.assertIn("cxxrun exited 3: not requeued", log)
        ran = os.listdir(self.out)  # a worker may be stopped before it got as far
        self.assertTrue(ran and all(name.startswith("ran.0.") for name in ran), ran)
        self.assertEqual((job.get("JobState"), job.get("Restarts"), job.get("ExitCode")), ("FAILED", "0", "3:0"),
                         log)


if __name__ == "__main__":
    unittest.main()
