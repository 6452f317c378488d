"""torchrun's newest flags and defaults (torch 2.9 to main) on the real binary:
--virtual-local-rank, the duplicate filters, the single-node default (a free
port and a fresh run id), --event-log-handler=console, --shutdown-timeout=0
and PET_SHUTDOWN_TIMEOUT, --local-addr under --standalone, signals listed in
--signals-to-handle ending the job, a partial --local-ranks-filter, and
${pid}/${hostname} in the console prefix."""
import glob
import json
import os
import re
import shlex
import signal
import socket
import subprocess

from harness import (EXAMPLES, TempDirTest, clean_env, end, finish_all, free_port, run, start, torch_importable,
                     wait_for)

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}")


def no_port_env(**extra):
    """clean_env() names a port for every job; these tests need a job that names none."""
    env = clean_env(**extra)
    env.pop("PET_MASTER_PORT")
    return env


class VirtualLocalRank(TempDirTest):
    def test_each_worker_sees_local_rank_0_and_its_own_device(self):
        # The agent sees devices 3,5,7: worker 1's only device is 5, its
        # device index 0. ${local_rank} in arguments stays the real one.
        rc, out, err = run(["--nproc-per-node=2", "--virtual-local-rank", "--no-python", "sh", "-c",
                            'echo "arg=$0 LOCAL_RANK=$LOCAL_RANK RANK=$RANK CVD=$CUDA_VISIBLE_DEVICES"',
                            "${local_rank}"],
                           env=clean_env(CUDA_VISIBLE_DEVICES="3,5,7"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), ["[default0]:arg=0 LOCAL_RANK=0 RANK=0 CVD=3",
                                                    "[default1]:arg=1 LOCAL_RANK=0 RANK=1 CVD=5"])

    def test_pet_variable_and_no_agent_devices(self):
        rc, out, err = run(["--nproc-per-node=2", "--no-python", "sh", "-c",
                            'echo "LOCAL_RANK=$LOCAL_RANK CVD=$CUDA_VISIBLE_DEVICES"'],
                           env=clean_env(PET_VIRTUAL_LOCAL_RANK="1"))
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), ["[default0]:LOCAL_RANK=0 CVD=0", "[default1]:LOCAL_RANK=0 CVD=1"])

    def test_log_directory_keeps_the_real_local_rank(self):
        rc, out, err = run(["--nproc-per-node=2", "--virtual-local-rank", f"--log-dir={self.dir}", "--redirects=1",
                            "--rdzv-id=v", "--no-python", "sh", "-c", "echo lr=$LOCAL_RANK"],
                           env=clean_env(CUDA_VISIBLE_DEVICES="1,0"))
        self.assertEqual(rc, 0, err)
        for real in (0, 1):
            [path] = glob.glob(f"{self.dir}/v_*/attempt_0/{real}/stdout.log")
            with open(path) as f:
                self.assertEqual(f.read(), "lr=0\n")

    def test_too_few_devices_is_one_line_and_exit_2(self):
        rc, out, err = run(["--nproc-per-node=3", "--virtual-local-rank", "--no-python", "true"],
                           env=clean_env(CUDA_VISIBLE_DEVICES="0,1"))
        self.assertEqual(rc, 2, err)
        self.assertEqual(err.strip().splitlines(), [
            "cxxrun: error: --virtual-local-rank: 3 workers (--nproc-per-node=3) but CUDA_VISIBLE_DEVICES=0,1 "
            "lists 2 devices; each worker needs one of its own"])


class DuplicateFilters(TempDirTest):
    def test_matching_lines_of_teed_ranks_go_to_one_file_per_stream(self):
        body = ('echo "step 1 loss=0.$LOCAL_RANK"; echo "noise $LOCAL_RANK"; echo "a,b at $LOCAL_RANK"; '
                'echo "ERROR on $LOCAL_RANK" >&2; echo "fine" >&2')
        rc, out, err = run(["--nproc-per-node=2", "--tee=3", f"--log-dir={self.dir}", "--rdzv-id=f",
                            "--duplicate-stdout-filters=loss,a,,b", "--duplicate_stderr_filters=ERROR",
                            "--no-python", "sh", "-c", body])
        self.assertEqual(rc, 0, err)
        [attempt] = glob.glob(f"{self.dir}/f_*/attempt_0")
        with open(f"{attempt}/filtered_stdout.log") as f:
            self.assertEqual(sorted(f.read().splitlines()), [
                "[default0]:a,b at 0", "[default0]:step 1 loss=0.0", "[default1]:a,b at 1", "[default1]:step 1 loss=0.1"])
        with open(f"{attempt}/filtered_stderr.log") as f:
            self.assertEqual(sorted(f.read().splitlines()), ["[default0]:ERROR on 0", "[default1]:ERROR on 1"])
        # The console and the per-rank files are unchanged.
        self.assertIn("[default0]:noise 0", out)
        with open(f"{attempt}/1/stdout.log") as f:
            self.assertEqual(f.read(), "step 1 loss=0.1\nnoise 1\na,b at 1\n")

    def test_only_teed_ranks_are_copied(self):
        rc, out, err = run(["--nproc-per-node=2", "--tee=0:1", f"--log-dir={self.dir}", "--rdzv-id=g",
                            "--duplicate-stdout-filters=loss", "--no-python", "sh", "-c", 'echo "loss $LOCAL_RANK"'])
        self.assertEqual(rc, 0, err)
        [path] = glob.glob(f"{self.dir}/g_*/attempt_0/filtered_stdout.log")
        with open(path) as f:
            self.assertEqual(f.read(), "[default0]:loss 0\n")

    def test_without_tee_it_says_nothing_is_copied(self):
        rc, out, err = run(["--duplicate-stdout-filters=loss", "--no-python", "true"])
        self.assertEqual(rc, 0, err)
        self.assertIn("--duplicate-stdout-filters=loss copies nothing: only the streams given to --tee", err)


class SingleNodeDefault(TempDirTest):
    def test_jobs_started_at_once_each_get_a_free_port_and_a_run_id(self):
        # torch main's default: no --master-port, no endpoint, one node. Every
        # job holds its workers' store until all its workers have seen it.
        body = 'echo "$MASTER_ADDR:$MASTER_PORT $TORCHELASTIC_RUN_ID"; sleep 1'
        procs = [start(["--nproc-per-node=2", "--no-python", "sh", "-c", body], env=no_port_env()) for _ in range(6)]
        try:
            results = finish_all(self, procs, timeout=60)
        finally:
            for p in procs:
                end(p)
        seen = set()
        for rc, out, err in results:
            self.assertEqual(rc, 0, err)
            lines = {line.split(":", 1)[1] for line in out.splitlines()}
            self.assertEqual(len(lines), 1, out)  # both workers of a job agree
            addr, port, run_id = re.match(r"(.*):(\d+) (.*)", lines.pop()).groups()
            self.assertEqual(addr, "127.0.0.1")
            self.assertNotEqual(int(port), 29500)
            self.assertRegex(run_id, UUID)
            seen.add((port, run_id))
        self.assertEqual(len(seen), 6)

    def test_a_taken_explicit_port_is_exit_2_with_the_hint(self):
        with socket.socket() as held:
            held.bind(("127.0.0.1", 0))
            held.listen()
            port = held.getsockname()[1]
            rc, out, err = run(["--master-port", str(port), "--no-python", "true"], env=no_port_env())
        self.assertEqual(rc, 2, err)
        # The agent's bind is the check: its log may come first.
        self.assertEqual([line for line in err.splitlines() if "error" in line], [
            f"cxxrun: error: --master-port={port}: port {port} is already in use on 127.0.0.1; pick another port, "
            "or leave the port out (one node: a free one)"])

    def test_jobs_racing_for_one_explicit_port_never_exit_1(self):
        # All start in the same instant, so several pass the launcher's port
        # check: the losers must still read exit 2, not a store failure.
        for _ in range(3):
            port = free_port()
            body = "sleep 1"
            procs = [start([f"--master-port={port}", "--no-python", "sh", "-c", body], env=no_port_env())
                     for _ in range(4)]
            try:
                results = finish_all(self, procs, timeout=60)
            finally:
                for p in procs:
                    end(p)
            codes = sorted(rc for rc, _, _ in results)
            self.assertEqual(codes, [0, 2, 2, 2], [err for _, _, err in results])
            for rc, out, err in results:
                if rc == 2:
                    self.assertIn(f"--master-port={port}: port {port} is already in use", err)


class EventLogHandler(TempDirTest):
    def test_console_prints_each_event_as_one_json_line_on_stderr(self):
        rc, out, err = run(["--nproc-per-node=2", "--event-log-handler=console", "--no-python", "true"])
        self.assertEqual(rc, 0, err)
        events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
        names = [e["name"] for e in events]
        self.assertEqual(names.count("torchelastic.worker.status.START"), 2, err)
        self.assertEqual(names.count("torchelastic.worker.status.SUCCEEDED"), 3, err)  # 2 workers, the agent
        self.assertIn("torchelastic.worker.status.RENDEZVOUS", names)
        for e in events:
            self.assertEqual(set(e), {"name", "source", "timestamp", "metadata"})
            self.assertEqual(set(e["metadata"]) >= {"run_id", "global_rank", "group_rank", "worker_id", "role",
                                                    "hostname", "state", "total_run_time", "rdzv_backend",
                                                    "raw_error", "metadata", "agent_restarts"}, True)

    def test_null_and_dynamic_rendezvous_print_none(self):
        for handler in ("null", "dynamic_rendezvous"):
            rc, out, err = run([f"--event-log-handler={handler}", "--no-python", "true"])
            self.assertEqual(rc, 0, err)
            self.assertNotIn('{"name"', err)

    def test_an_unknown_handler_is_exit_2(self):
        rc, out, err = run(["--event-log-handler=file", "--no-python", "true"])
        self.assertEqual(rc, 2, err)
        self.assertIn("--event-log-handler=file", err)


class ShutdownTimeout(TempDirTest):
    def trapping_job(self, extra, env):
        # Rank 1 fails; rank 0 traps SIGTERM and would outlive any grace.
        worker = self.script("w.sh", 'if [ "$RANK" = 1 ]; then sleep 0.3; exit 3; fi\n'
                                     'trap "echo got TERM; sleep 100" TERM\nwhile :; do sleep 0.05; done\n')
        return run(["--nproc-per-node=2"] + extra + ["--no-python", worker], env=env)

    def test_zero_is_sigkill_at_once(self):
        for extra, env in (["--shutdown-timeout=0"], clean_env()), ([], clean_env(PET_SHUTDOWN_TIMEOUT="0")):
            rc, out, err = self.trapping_job(extra, env)
            self.assertEqual(rc, 3, err)
            self.assertNotIn("got TERM", out)
            self.assertIn("stopping 1 workers with SIGKILL (shutdown grace 0)", err)

    def test_pet_shutdown_timeout_sets_the_grace(self):
        rc, out, err = self.trapping_job([], clean_env(PET_SHUTDOWN_TIMEOUT="0.5",
                                                       TORCH_ELASTIC_SHUTDOWN_TIMEOUT="100"))
        self.assertEqual(rc, 3, err)
        self.assertIn("got TERM", out)
        self.assertIn("workers did not stop within 500 ms; sending SIGKILL", err)


class LocalAddr(TempDirTest):
    def test_local_addr_is_master_addr_under_standalone(self):
        rc, out, err = run(["--standalone", "--local-addr=127.0.0.2", "--no-python", "sh", "-c", "echo $MASTER_ADDR"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.strip(), "[default0]:127.0.0.2")

    def test_workers_reach_their_store_at_a_local_addr_that_is_not_loopback(self):
        if not torch_importable():
            self.skipTest("torch is not importable")
        addrs = subprocess.run(["ip", "-4", "-o", "addr", "show", "scope", "global"], capture_output=True,
                               text=True).stdout.split()
        own = next((a.split("/")[0] for a in addrs if re.match(r"\d+\.\d+\.\d+\.\d+/", a)), None)
        if own is None:
            self.skipTest("this host has no address but loopback")
        body = ("import os, torch.distributed as dist\n"
                "s = dist.TCPStore(os.environ['MASTER_ADDR'], int(os.environ['MASTER_PORT']), is_master=False,\n"
                "                  timeout=__import__('datetime').timedelta(seconds=20))\n"
                "s.set('k' + os.environ['RANK'], 'v'); print(os.environ['MASTER_ADDR'], s.get('k0').decode())\n")
        path = os.path.join(self.dir, "store.py")
        with open(path, "w") as f:
            f.write(body)
        rc, out, err = run(["--standalone", f"--local-addr={own}", "--nproc-per-node=2", path],
                           env=clean_env(PYTHON_EXEC="/usr/bin/python3"), timeout=120)
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), [f"[default0]:{own} v", f"[default1]:{own} v"])


class SignalsToHandle(TempDirTest):
    def test_a_listed_signal_ends_the_job_as_in_torch(self):
        worker = self.script("w.sh", 'trap "echo got USR1; exit 0" USR1\necho ready\nwhile :; do sleep 0.05; done\n')
        p = start(["--signals-to-handle=SIGTERM,SIGUSR1", "--no-python", worker])
        try:
            wait_for(lambda: p.stdout.readline().strip() == "[default0]:ready", what="the worker to start")
            p.send_signal(signal.SIGUSR1)
            out, err = p.communicate(timeout=30)
        finally:
            end(p)
        self.assertEqual(p.returncode, 128 + signal.SIGUSR1, err)
        self.assertIn("got USR1", out)
        self.assertIn("received SIGUSR1; forwarding it to workers and shutting down", err)


class LocalRanksFilter(TempDirTest):
    def test_ranks_this_node_lacks_are_a_warning(self):
        rc, out, err = run(["--nproc-per-node=2", "--local-ranks-filter=0,5", "--no-python", "sh", "-c",
                            "echo hi $LOCAL_RANK"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out.splitlines(), ["[default0]:hi 0"])
        self.assertIn("--local-ranks-filter=0,5: local rank 5 not on this node", err)

    def test_none_that_exist_is_exit_2(self):
        rc, out, err = run(["--nproc-per-node=2", "--local-ranks-filter=5", "--no-python", "true"])
        self.assertEqual(rc, 2, err)


class PrefixTemplate(TempDirTest):
    def test_pid_and_hostname(self):
        rc, out, err = run(["--nproc-per-node=2", "--no-python", "sh", "-c", "echo $$"],
                           env=clean_env(TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE="${hostname}|${pid}|${rank}> "))
        self.assertEqual(rc, 0, err)
        host = socket.gethostname()
        for line in out.splitlines():
            prefix_host, pid, rest = line.split("|", 2)
            self.assertEqual(prefix_host, host)
            self.assertEqual(rest.split("> ")[1], pid)  # the worker's own pid


class LogsSpecs(TempDirTest):
    def test_refused_with_what_to_use(self):
        rc, out, err = run(["--logs-specs=custom", "--no-python", "true"])
        self.assertEqual(rc, 2, err)
        self.assertIn("--log-dir", err)


README = os.path.join(os.path.dirname(__file__), "../../README.md")


class ReadmeCommandLine(TempDirTest):
    def readme_command(self):
        """The command under README's "A torch 2.10 command line, unchanged", as argv."""
        with open(README) as f:
            text = f.read()
        section = text[text.index("## A torch 2.10 command line, unchanged"):]
        block = section[section.index("```\n") + 4:]
        block = block[:block.index("```")]
        return shlex.split(block.replace("\\\n", " "))

    def test_the_readme_torch_2_10_command_runs_unchanged(self):
        argv = self.readme_command()
        self.assertEqual(argv[0], "cxxrun")
        program = argv.index("build/examples/train")
        argv[program] = os.path.join(EXAMPLES, "train")
        rc, out, err = run(argv[1:] + ["--checkpoint-dir", self.dir], env=no_port_env(), timeout=120)
        self.assertEqual(rc, 0, err)
        # --local-ranks-filter 0: rank 0's lines only, with --role rank's prefix.
        self.assertTrue(out.splitlines(), err)
        for line in out.splitlines():
            self.assertTrue(line.startswith("[rank0]:"), line)
        self.assertIn("final loss", out)
        # --tee 3 into a fresh temporary log dir, removed after success: the
        # filtered file was there while the job ran (DuplicateFilters checks it).
        self.assertNotIn("copies nothing", err)
