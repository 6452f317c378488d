"""Bad input: one clear line naming the value, exit 2, no crash or trace."""
import os
import resource
import socket
import subprocess

from harness import CXXRUN, TempDirTest, clean_env, run


class BadInput(TempDirTest):
    def setUp(self):
        super().setUp()
        self.prog = self.script("ok.sh", "exit 0\n")

    def assert_rejected(self, args, needle, env=None, nproc_limit=None):
        if nproc_limit is None:
            rc, out, err = run(args, env=env, timeout=30)
        else:
            # A soft RLIMIT_NPROC for cxxrun alone (root is not held to it,
            # but cxxrun reads it all the same).
            hard = resource.getrlimit(resource.RLIMIT_NPROC)[1]
            soft = nproc_limit if hard == resource.RLIM_INFINITY else min(nproc_limit, hard)
            p = subprocess.run([CXXRUN] + list(args), env=env or clean_env(), capture_output=True,
                               text=True, timeout=30, stdin=subprocess.DEVNULL,
                               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NPROC,
                                                                     (soft, hard)))
            rc, out, err = p.returncode, p.stdout, p.stderr
        lines = [l for l in err.splitlines() if l.strip()]
        self.assertEqual(rc, 2, f"{args}: rc={rc} stderr={err!r}")
        self.assertEqual(len(lines), 1, f"{args}: expected one line, got {err!r}")
        self.assertTrue(lines[0].startswith("cxxrun: error: "), lines[0])
        self.assertIn(needle, lines[0])
        for bad in ("terminate called", "Traceback", "Aborted", "what():"):
            self.assertNotIn(bad, err)
        self.assertEqual(out, "")

    def test_nproc_zero(self):
        self.assert_rejected(["--nproc-per-node=0", self.prog], "0")

    def test_nproc_not_a_number(self):
        self.assert_rejected(["--nproc-per-node=abc", self.prog], "abc")

    def test_nnodes_min_above_max(self):
        self.assert_rejected(["--nnodes=2:1", self.prog], "2:1")

    def test_nnodes_garbage(self):
        self.assert_rejected(["--nnodes=1:2:3", self.prog], "1:2:3")

    def test_redirects_out_of_range(self):
        self.assert_rejected(["--redirects=7", self.prog], "7")

    def test_tty_bad_choice(self):
        self.assert_rejected(["--tty=sometimes", self.prog],
                             "--tty=sometimes: invalid choice (choose from auto, always, never)")
        self.assert_rejected([self.prog], "CXXRUN_TTY=yes: invalid choice", env=clean_env(CXXRUN_TTY="yes"))

    def test_tee_bad_map(self):
        self.assert_rejected(["--tee=0:4", self.prog], "0:4")

    def test_negative_max_restarts(self):
        self.assert_rejected(["--max-restarts=-1", self.prog], "-1")

    def test_missing_program_argument(self):
        self.assert_rejected(["--nproc-per-node=2"], "program")

    def test_program_does_not_exist(self):
        self.assert_rejected(["--no-python", f"{self.dir}/nope"], "nope")

    def test_program_not_executable(self):
        path = os.path.join(self.dir, "plain.sh")
        with open(path, "w") as f:
            f.write("#!/bin/sh\nexit 0\n")
        self.assert_rejected(["--no-python", path], "plain.sh")

    def test_python_script_missing(self):
        self.assert_rejected([f"{self.dir}/missing.py"], "missing.py")

    def test_master_port_in_use(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        try:
            self.assert_rejected([f"--master-port={port}", self.prog], str(port))
        finally:
            s.close()

    def test_module_with_no_python(self):
        self.assert_rejected(["-m", "--no-python", "json"], "--no-python")

    def test_pet_standalone_true(self):
        self.assert_rejected([self.prog], "PET_STANDALONE", env=clean_env(PET_STANDALONE="true"))

    def test_pet_nproc_bad_value(self):
        self.assert_rejected([self.prog], "abc", env=clean_env(PET_NPROC_PER_NODE="abc"))

    def test_unknown_option(self):
        self.assert_rejected(["--nproc-per-nodes=2", self.prog], "--nproc-per-nodes")

    def test_ambiguous_abbreviation(self):
        self.assert_rejected(["--rdzv=c10d", self.prog],
                             "ambiguous option: --rdzv could match --rdzv-backend, --rdzv-endpoint, "
                             "--rdzv-id, --rdzv-conf")

    def test_node_rank_out_of_range(self):
        self.assert_rejected(["--nnodes=2", "--node-rank=5", self.prog], "--node-rank=5")

    def test_static_needs_fixed_nnodes(self):
        self.assert_rejected(["--nnodes=1:2", self.prog], "fixed --nnodes=N, got 1:2")

    def test_standalone_with_several_nodes(self):
        self.assert_rejected(["--standalone", "--nnodes=2", self.prog], "drop --nnodes=2")

    def test_c10d_without_endpoint(self):
        self.assert_rejected(["--rdzv-backend=c10d", self.prog],
                             "--rdzv-backend=c10d needs --rdzv-endpoint=HOST[:PORT]")

    def test_bad_rdzv_conf_key(self):
        self.assert_rejected(["--rdzv-backend=c10d", "--rdzv-endpoint=localhost:29400",
                              "--rdzv-conf=join_timout=5", self.prog], "join_timout")

    def test_etcd_needs_its_members(self):
        self.assert_rejected(["--rdzv-backend=etcd", self.prog], "--rdzv-backend=etcd needs --rdzv-endpoint")

    def test_bad_signal_name(self):
        self.assert_rejected(["--signals-to-handle=SIGFOO", self.prog], "SIGFOO")

    def test_bad_shutdown_timeout(self):
        self.assert_rejected([self.prog], "TORCH_ELASTIC_SHUTDOWN_TIMEOUT",
                             env=clean_env(TORCH_ELASTIC_SHUTDOWN_TIMEOUT="soon"))

    def test_unknown_fault_kind(self):
        self.assert_rejected(["--inject-fault=explode:rank=1", self.prog],
                             "--inject-fault=explode:rank=1")

    def test_fault_env_missing_key(self):
        self.assert_rejected([self.prog], "CXXRUN_INJECT_FAULTS=kill:rank=1",
                             env=clean_env(CXXRUN_INJECT_FAULTS="kill:rank=1"))

    def test_section_timeout_without_seconds(self):
        self.assert_rejected(["--section-timeout=step", self.prog], "--section-timeout=step")

    def test_stack_dump_sigkill(self):
        self.assert_rejected(["--stack-dump-signal=SIGKILL", self.prog],
                             "--stack-dump-signal=SIGKILL")

    def test_event_log_missing_directory(self):
        missing = os.path.join(self.dir, "nope", "events.jsonl")
        self.assert_rejected([f"--event-log={missing}", self.prog], missing)

    def test_bad_file_timer_switch(self):
        self.assert_rejected([self.prog], "TORCHELASTIC_ENABLE_FILE_TIMER=yes",
                             env=clean_env(TORCHELASTIC_ENABLE_FILE_TIMER="yes"))

    def test_unknown_loglevel(self):
        self.assert_rejected([self.prog], "LOGLEVEL=garbage: not a log level",
                             env=clean_env(LOGLEVEL="garbage"))

    def test_nproc_above_the_per_node_cap(self):
        self.assert_rejected(["--nproc-per-node=4097", self.prog],
                             "--nproc-per-node=4097: at most 4096 workers per node")

    def test_nproc_above_rlimit_nproc(self):
        self.assert_rejected(["--nproc-per-node=30", self.prog], "RLIMIT_NPROC",
                             nproc_limit=20)

    def test_local_ranks_filter_beyond_nproc(self):
        # Would show no output at all (some ranks missing is only a warning).
        self.assert_rejected(["--nproc-per-node=2", "--local-ranks-filter=9", self.prog],
                             "--local-ranks-filter=9: no such local rank")

    def test_fault_rank_beyond_the_job(self):
        # Would never fire.
        self.assert_rejected(["--nproc-per-node=2", "--inject-fault=kill:rank=99,after=100",
                              self.prog], "rank=99 is out of range")

    def test_fault_node_beyond_the_job(self):
        self.assert_rejected(["--inject-fault=drop_store:node=1,after=100", self.prog],
                             "node=1 is out of range")

    def test_fault_attempt_beyond_max_restarts(self):
        self.assert_rejected(["--max-restarts=1", "--inject-fault=kill:rank=0,after=1,attempt=2",
                              self.prog], "attempt=2 never comes")

    def test_health_port_in_use(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        try:
            self.assert_rejected([f"--health-port={port}", self.prog],
                                 f"--health-port={port}: port {port} is already in use")
        finally:
            s.close()

    def test_health_host_not_on_this_machine(self):
        self.assert_rejected(["--health-port=0", "--health-host=192.0.2.1", self.prog],
                             "--health-host=192.0.2.1: not an address of this machine")

    def test_log_dir_cannot_be_created(self):
        blocker = self.script("file", "")
        self.assert_rejected([f"--log-dir={blocker}/logs", self.prog],
                             f"--log-dir={blocker}/logs: cannot create directory")

    def test_help_exits_zero(self):
        rc, out, err = run(["--help"])
        self.assertEqual(rc, 0, err)
        self.assertIn("usage: cxxrun", out)
        self.assertIn("--nproc-per-node", out)
        self.assertIn("--nproc_per_node", out)
        self.assertIn("cxxrun extensions:", out)
        self.assertIn("--inject-fault SPEC", out)
