"""Per-rank prefixes, --redirects, --tee, --log-dir layout, --local-ranks-filter."""
import glob
import os
import re
import threading

from harness import TempDirTest, end, run, start, wait_for

HELLO = 'echo "out from $LOCAL_RANK"; echo "err from $LOCAL_RANK" >&2\n'


class Output(TempDirTest):
    def test_a_progress_bar_and_a_prompt_reach_the_console_before_their_line_ends(self):
        # The worker goes on only once the test has seen each fragment: a
        # console that waits for the newline never shows them.
        go = f"{self.dir}/go"
        worker = self.script("bar.sh", f"""
printf 'epoch 1: 50%%\r'
for i in $(seq 200); do [ -e {go}.1 ] && break; sleep 0.05; done
printf 'epoch 1: 100%%\r'
printf 'continue? '
for i in $(seq 200); do [ -e {go}.2 ] && break; sleep 0.05; done
echo yes
""")
        p = start(["--nproc-per-node=1", worker])
        out = []  # raw: a text stream would turn each '\r' into a newline
        fd = p.stdout.fileno()
        reader = threading.Thread(target=lambda: out.extend(iter(lambda: os.read(fd, 4096).decode(), "")), daemon=True)
        reader.start()
        try:
            wait_for(lambda: "[default0]:epoch 1: 50%\r" in "".join(out), timeout=8, what="the first redraw")
            open(f"{go}.1", "w").close()
            wait_for(lambda: "[default0]:continue? " in "".join(out), timeout=8, what="the prompt")
            open(f"{go}.2", "w").close()
            self.assertEqual(p.wait(timeout=20), 0)
            reader.join(timeout=10)
            self.assertEqual("".join(out),
                             "[default0]:epoch 1: 50%\r[default0]:epoch 1: 100%\r[default0]:continue? yes\n")
        finally:
            end(p)

    def test_fragments_and_other_ranks_lines_never_share_a_console_line(self):
        # Rank 0 leaves a fragment longer than the 100 ms the console waits
        # for its end; rank 1's lines come meanwhile.
        worker = self.script("frag.sh", """
if [ "$LOCAL_RANK" = 0 ]; then
  for i in 1 2 3; do printf "frag-A$i"; sleep 0.3; printf -- "-rest-of-A$i\\n"; done
else
  for i in 1 2 3; do sleep 0.15; echo "line-B$i"; sleep 0.15; done
fi
""")
        rc, out, err = run(["--nproc-per-node=2", worker])
        self.assertEqual(rc, 0, err)
        text = {"0": "", "1": ""}
        for line in out.splitlines():
            m = re.fullmatch(r"\[default([01])\]:(.*)", line)
            self.assertIsNotNone(m, f"a console line without its prefix: {line!r}\n{out}")
            self.assertNotIn("[default", m.group(2), f"two ranks on one console line: {line!r}\n{out}")
            text[m.group(1)] += m.group(2)
        self.assertEqual(text["0"], "".join(f"frag-A{i}-rest-of-A{i}" for i in (1, 2, 3)), out)
        self.assertEqual(text["1"], "".join(f"line-B{i}" for i in (1, 2, 3)), out)

    def logs(self, rank, stream):
        [path] = glob.glob(f"{self.dir}/logs/*/attempt_0/{rank}/{stream}.log")
        with open(path) as f:
            return f.read()

    def test_prefixed_console_output(self):
        rc, out, err = run(["--nproc-per-node=3", self.script("h.sh", HELLO)])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), [f"[default{r}]:out from {r}" for r in range(3)])
        for r in range(3):
            self.assertIn(f"[default{r}]:err from {r}", err.splitlines())

    def test_redirects_all_to_files(self):
        rc, out, err = run(["--nproc-per-node=2", "--redirects=3", f"--log-dir={self.dir}/logs",
                            self.script("h.sh", HELLO)])
        self.assertEqual(rc, 0, err)
        self.assertNotIn("out from", out)
        self.assertNotIn("err from", err)
        for r in range(2):
            self.assertEqual(self.logs(r, "stdout"), f"out from {r}\n")
            self.assertEqual(self.logs(r, "stderr"), f"err from {r}\n")

    def test_tee_per_rank_map(self):
        rc, out, err = run(["--nproc-per-node=2", "--tee=0:1", f"--log-dir={self.dir}/logs",
                            self.script("h.sh", HELLO)])
        self.assertEqual(rc, 0, err)
        self.assertIn("[default0]:out from 0", out)
        self.assertIn("[default1]:out from 1", out)
        self.assertEqual(self.logs(0, "stdout"), "out from 0\n")
        self.assertEqual(glob.glob(f"{self.dir}/logs/*/attempt_0/1/stdout.log"), [])

    def test_local_ranks_filter(self):
        rc, out, err = run(["--nproc-per-node=3", "--local-ranks-filter=0,2", self.script("h.sh", HELLO)])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()), ["[default0]:out from 0", "[default2]:out from 2"])
        self.assertNotIn("from 1", err)

    def test_filtered_rank_failure_still_reported(self):
        worker = self.script("f.sh", '[ "$LOCAL_RANK" = 1 ] && { echo "hidden reason" >&2; exit 3; }; exit 0\n')
        rc, out, err = run(["--nproc-per-node=2", "--local-ranks-filter=0", worker])
        self.assertEqual(rc, 3, err)
        self.assertIn("    hidden reason", err, "the summary shows the last stderr lines anyway")

    def test_partial_last_line_is_not_lost(self):
        rc, out, err = run(["--nproc-per-node=1", self.script("p.sh", 'printf "no newline"\n')])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "[default0]:no newline\n")

    def test_log_dir_devnull_disables_files(self):
        dump = self.script("d.sh", f'echo "[$TORCHELASTIC_ERROR_FILE]" > {self.dir}/ef\n')
        rc, out, err = run(["--nproc-per-node=1", "--log-dir=/dev/null", dump])
        self.assertEqual(rc, 0, err)
        with open(f"{self.dir}/ef") as f:
            self.assertEqual(f.read().strip(), "[]")

    def test_default_temp_log_dir_is_removed(self):
        tmp = os.path.join(self.dir, "tmp")
        os.mkdir(tmp)
        from harness import clean_env
        rc, out, err = run(["--nproc-per-node=2", self.script("h.sh", HELLO)], env=clean_env(TMPDIR=tmp))
        self.assertEqual(rc, 0, err)
        self.assertEqual(os.listdir(tmp), [])

    def test_failed_job_keeps_its_error_files(self):
        tmp = os.path.join(self.dir, "tmp")
        os.mkdir(tmp)
        from harness import clean_env
        worker = self.script("f.sh", 'echo \'{"message": "kept"}\' > "$TORCHELASTIC_ERROR_FILE"; exit 4\n')
        rc, out, err = run(["--nproc-per-node=1", worker], env=clean_env(TMPDIR=tmp))
        self.assertEqual(rc, 4, err)
        kept = glob.glob(f"{tmp}/torchelastic_*/*/attempt_0/0/error.json")
        self.assertEqual(len(kept), 1, "the summary names this file; it must still be there")
        self.assertIn(kept[0], err)

