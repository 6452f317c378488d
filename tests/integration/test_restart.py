"""Restarts count up, reach workers as TORCHELASTIC_RESTART_COUNT, stop at the limit."""
from harness import TempDirTest, run


class Restarts(TempDirTest):
    def attempts_seen(self):
        with open(f"{self.dir}/attempts") as f:
            return [line.split() for line in f.read().splitlines()]

    def test_restarts_stop_at_limit(self):
        worker = self.script("w.sh", f"""
echo "$TORCHELASTIC_RESTART_COUNT $LOCAL_RANK" >> {self.dir}/attempts
[ "$LOCAL_RANK" = 0 ] && exit 5
exec sleep 60
""")
        rc, out, err = run(["--nproc-per-node=2", "--max-restarts=2", worker], timeout=60)
        self.assertEqual(rc, 5, err)
        counts = sorted({int(a) for a, _ in self.attempts_seen()})
        self.assertEqual(counts, [0, 1, 2])
        self.assertEqual(err.count("restarting"), 2)
        self.assertEqual(err.count(" FAILED"), 1, "one summary, at the end")

    def test_restart_then_success(self):
        worker = self.script("w.sh", f"""
echo "$TORCHELASTIC_RESTART_COUNT $LOCAL_RANK" >> {self.dir}/attempts
[ "$TORCHELASTIC_RESTART_COUNT" = 0 ] && [ "$LOCAL_RANK" = 1 ] && exit 3
exit 0
""")
        rc, out, err = run(["--nproc-per-node=3", "--max-restarts=5", worker], timeout=60)
        self.assertEqual(rc, 0, err)
        seen = self.attempts_seen()
        self.assertEqual(sorted(r for a, r in seen if a == "1"), ["0", "1", "2"])
        self.assertFalse(any(a == "2" for a, _ in seen))

    def test_no_restart_by_default(self):
        worker = self.script("w.sh", f'echo "$TORCHELASTIC_RESTART_COUNT $LOCAL_RANK" >> {self.dir}/attempts; exit 4\n')
        rc, out, err = run(["--nproc-per-node=1", worker], timeout=30)
        self.assertEqual(rc, 4, err)
        self.assertEqual(self.attempts_seen(), [["0", "0"]])
