"""The chaos suite CI runs: faults of every kind (chaos.py), each checked
for orphans, the exit code, the root cause named, and the time bound.
bench/chaos.sh runs the same with a few hundred."""
import os
import unittest

from chaos import KINDS, run_faults, summary

CXXRUN = os.environ.get("CXXRUN", os.path.join(os.path.dirname(__file__), "../../build/bin/cxxrun"))


class Chaos(unittest.TestCase):
    def test_sixty_faults_leave_no_orphan_and_no_wrong_status(self):
        results = run_faults(60, seed=int(os.environ.get("CHAOS_SEED", "12")), cxxrun=os.path.abspath(CXXRUN))
        bad = [r for r in results if r["orphans"] or r["wrong"] or r["hung"]]
        report = "\n\n".join(f"{r['kind']}: rc={r['rcs']} expected={r['expected']} orphans={r['orphans']} "
                             f"hung={r['hung']} {r['seconds']} s\n" + "\n".join(e[-2000:] for e in r["stderr"])
                             for r in bad)
        self.assertFalse(bad, report)
        self.assertEqual({r["kind"] for r in results}, set(KINDS))
        s = summary(results)
        print(" ".join(f"{k}={v}" for k, v in s.items()))


if __name__ == "__main__":
    unittest.main()
