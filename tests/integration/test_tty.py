"""--tty: workers see a terminal where cxxrun's console is one (or always),
and a progress bar drawn in a real terminal (tmux) advances in place."""
import os
import shutil
import subprocess
import unittest

from harness import CXXRUN, TempDirTest, clean_env, run, wait_for

REPORT = '[ -t 1 ] && echo "out:tty" || echo "out:pipe"; [ -t 2 ] && echo "err:tty" >&2 || echo "err:pipe" >&2\n'

# Draws a tqdm-style bar on stderr, sized to the terminal as tqdm sizes it,
# one step each time the test creates <go>.<step>; refuses to draw without
# a terminal, as a worker that checks isatty would.
BAR = r'''
import os, sys, time
go = sys.argv[1]
print(f"tty: out={os.isatty(1)} err={os.isatty(2)}", flush=True)
if not os.isatty(2):
    sys.exit("stderr is not a terminal: no progress bar")
columns = os.get_terminal_size(2).columns
for step in (1, 2, 3):
    label = f"step {step}/3 "
    width = columns - len(label) - 2
    done = width * step // 3
    sys.stderr.write(f"\r{label}|{'#' * done}{'.' * (width - done)}|")
    sys.stderr.flush()
    deadline = time.monotonic() + 60
    while not os.path.exists(f"{go}.{step}") and time.monotonic() < deadline:
        time.sleep(0.02)
sys.stderr.write("\n")
print("done", flush=True)
'''


class Tty(TempDirTest):
    def report(self, args, env=None):
        rc, out, err = run(["--nproc-per-node=2"] + args + [self.script("r.sh", REPORT)], env=env)
        self.assertEqual(rc, 0, err)
        return sorted(l for l in out.splitlines() if l.startswith("[default")), \
            sorted(l for l in err.splitlines() if l.startswith("[default"))

    def test_always_gives_every_worker_a_terminal(self):
        out, err = self.report(["--tty=always"])
        self.assertEqual(out, ["[default0]:out:tty", "[default1]:out:tty"])
        self.assertEqual(err, ["[default0]:err:tty", "[default1]:err:tty"])
        out, err = self.report([], env=clean_env(CXXRUN_TTY="always"))
        self.assertEqual(out, ["[default0]:out:tty", "[default1]:out:tty"])

    def test_never_and_auto_without_a_terminal_give_pipes(self):
        # The test's pipes are cxxrun's stdout and stderr: auto sees no terminal.
        for args in (["--tty=never"], ["--tty", "auto"], []):
            out, err = self.report(args)
            self.assertEqual(out, ["[default0]:out:pipe", "[default1]:out:pipe"], args)
            self.assertEqual(err, ["[default0]:err:pipe", "[default1]:err:pipe"], args)

    def test_a_terminal_passes_bytes_unchanged(self):
        worker = self.script("b.sh", r"printf 'a\nb\n'; printf '50%%\r100%%\n' >&2" + "\n")
        # Bytes, not text: a text stream would turn every '\r' into a newline.
        p = subprocess.run([CXXRUN, "--tty=always", worker], env=clean_env(), capture_output=True, timeout=60,
                           stdin=subprocess.DEVNULL)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertEqual(p.stdout, b"[default0]:a\n[default0]:b\n")  # no "\r\n"
        self.assertIn(b"\n[default0]:50%\r[default0]:100%\n", p.stderr)

    def test_a_failure_summary_reads_a_terminal_to_its_last_line(self):
        worker = self.script("f.sh", 'for i in 1 2 3; do echo "reason $i" >&2; done; exit 3\n')
        rc, out, err = run(["--tty=always", worker])
        self.assertEqual(rc, 3, err)
        self.assertIn("stderr (last 3 lines):\n    reason 1\n    reason 2\n    reason 3\n", err)
        self.assertNotIn("\r", err)


@unittest.skipIf(shutil.which("tmux") is None, "tmux is not installed (scripts/install-deps.sh installs it)")
class RealTerminal(TempDirTest):
    """cxxrun in a tmux pane: what a user at a terminal sees."""

    COLUMNS = 100

    def tmux(self, *args, check=True):
        return subprocess.run(["tmux", "-S", self.socket, *args], env=self.env, capture_output=True,
                              text=True, timeout=20, check=check, stdin=subprocess.DEVNULL)

    def pane(self):
        return self.tmux("capture-pane", "-p", "-t", "bar").stdout

    def setUp(self):
        super().setUp()
        # A server of the test's own (its socket in the test's directory), so
        # the user's tmux is never touched and tearDown kills only this one.
        self.socket = os.path.join(self.dir, "tmux.sock")
        self.env = clean_env(TERM="xterm")
        self.env.pop("TMUX", None)

    def tearDown(self):
        # Before the directory (and the socket in it) goes.
        self.tmux("kill-server", check=False)
        super().tearDown()

    def test_a_progress_bar_advances_in_place_in_a_real_terminal(self):
        go = os.path.join(self.dir, "go")
        with open(os.path.join(self.dir, "bar.py"), "w") as f:
            f.write(BAR)
        command = f'"{CXXRUN}" --nproc-per-node=1 "{self.dir}/bar.py" "{go}"; echo "cxxrun exit=$?"; sleep 120'
        self.tmux("-f", "/dev/null", "new-session", "-d", "-s", "bar", "-x", str(self.COLUMNS), "-y", "30",
                  command)
        seen = {}

        def bar_at(step):
            text = self.pane()
            seen["pane"] = text
            return f"[default0]:step {step}/3 |" in text or "cxxrun exit=" in text

        for step in (1, 2, 3):
            wait_for(lambda: bar_at(step), timeout=30, what=f"step {step} of the bar in the pane")
            text = seen["pane"]
            self.assertIn("[default0]:tty: out=True err=True", text, text)
            bars = [l for l in text.splitlines() if "step " in l]
            # Redrawn in place: one row, the latest state, sized to fit
            # beside the rank prefix (a wider bar would wrap, and each '\r'
            # would then leave a broken row behind).
            self.assertEqual(len(bars), 1, text)
            self.assertTrue(bars[0].startswith(f"[default0]:step {step}/3 |"), text)
            self.assertTrue(bars[0].endswith("|"), text)
            self.assertEqual(len(bars[0]), self.COLUMNS, text)
            open(f"{go}.{step}", "w").close()
        wait_for(lambda: "cxxrun exit=" in self.pane(), timeout=30, what="cxxrun to exit")
        text = self.pane()
        self.assertIn("[default0]:done", text, text)
        self.assertIn("cxxrun exit=0", text, text)
