"""examples/multinode/ssh_fanout.sh with a stand-in for ssh that runs the
command on this machine: the script's argument handling and quoting, and
that the agents it starts form one job with the first host as endpoint."""
import os
import subprocess

from harness import CXXRUN, TempDirTest, clean_env, free_port

SCRIPT = os.path.join(os.path.dirname(__file__), "../../examples/multinode/ssh_fanout.sh")

FAKE_SSH = """# ssh [-tt] [-o OPTION]... HOST COMMAND: logs the host and the command,
# then runs the command here as sshd would, through a shell.
while [[ $1 == -* ]]; do [[ $1 == -o ]] && shift; shift; done
printf '%s\\t%s\\n' "$1" "$2" >> {log}
export SSH_CONNECTION="127.0.0.1 50000 127.0.0.1 22"
exec bash -c "$2"
"""


class SshFanout(TempDirTest):
    def fanout(self, *args, **env):
        log = os.path.join(self.dir, "ssh.log")
        fake = self.script("fake_ssh", FAKE_SSH.format(log=log))
        env = clean_env(SSH=fake, PATH=os.path.dirname(os.path.abspath(CXXRUN)) + ":" + os.environ["PATH"],
                        **env)
        p = subprocess.run(["bash", SCRIPT, *args], env=env, capture_output=True, text=True, timeout=90,
                           stdin=subprocess.DEVNULL)
        calls = []
        if os.path.exists(log):
            with open(log) as f:
                calls = [line.rstrip("\n").split("\t", 1) for line in f]
        return p, calls

    def test_agents_form_one_job_with_arguments_intact(self):
        worker = self.script("w.sh", f'printf "%s|" "$RANK" "$GROUP_WORLD_SIZE" "$@" > {self.dir}/out.$RANK\n')
        port = free_port()
        p, calls = self.fanout("hostA,hostB", "--nproc-per-node=2", "--no-python", worker, "two words", "it's",
                               RDZV_PORT=port, RUN_ID="fanout-test")
        self.assertEqual(p.returncode, 0, p.stderr)
        # One call asks the first host for its address; then one agent per host.
        # The agents start side by side, so their two calls come in either order.
        self.assertEqual(calls[0][0] if calls else None, "hostA")
        self.assertEqual(sorted(host for host, _ in calls[1:]), ["hostA", "hostB"])
        for _, command in calls[1:]:
            self.assertIn(f"--rdzv-endpoint=127.0.0.1:{port}", command)
            self.assertIn("--nnodes=2", command)
            self.assertIn("--rdzv-id=fanout-test", command)
        outs = sorted(n for n in os.listdir(self.dir) if n.startswith("out."))
        self.assertEqual(outs, ["out.0", "out.1", "out.2", "out.3"])
        with open(os.path.join(self.dir, "out.3")) as f:
            self.assertEqual(f.read(), "3|2|two words|it's|")

    def test_a_failing_host_fails_the_script(self):
        p, _ = self.fanout("hostA", "--nproc-per-node=1", "--no-python", "/bin/false",
                           RDZV_PORT=free_port(), RDZV_HOST="127.0.0.1")
        self.assertEqual(p.returncode, 1, p.stderr)

    def test_usage(self):
        for args in ([], ["hostA"], ["--nproc-per-node=2", "prog"]):
            with self.subTest(args=args):
                p, calls = self.fanout(*args)
                self.assertEqual(p.returncode, 2)
                self.assertIn("usage:", p.stderr)
                self.assertEqual(calls, [])
