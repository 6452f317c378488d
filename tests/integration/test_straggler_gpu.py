"""A GPU that the (fake) NVML reports thermally throttled names its rank,
with the throttle as the cause (docs/stragglers.md, the gpu-clock signal).

Apart from test_straggler.py because it needs no CPU of its own: its ranks
sleep, and the signal is the clock the fake NVML reports, which a busy
machine does not change. So it is not labelled cpu_bound and runs among the
parallel tests (tests/CMakeLists.txt, "How the suite is scheduled"), not in
the serial phase kept for the tests that measure who computes."""
import os
import unittest

from harness import TempDirTest, clean_env, end, start, wait_for
from stragglers import NAMED_IN_TESTS, Output

FAKE_NVML = os.environ.get("FAKE_NVML_LIBRARY", os.path.join(os.path.dirname(__file__),
                                                             "../../build/tests/fake_nvml/libnvidia-ml.so.1"))


class GpuThrottled(TempDirTest):
    def setUp(self):
        super().setUp()
        if not os.path.exists(FAKE_NVML):
            self.skipTest(f"no fake NVML at {FAKE_NVML} (the build's fake_nvml target)")

    def test_a_thermally_throttled_gpu_names_its_rank_and_the_cause(self):
        state = os.path.join(self.dir, "nvml-state")
        with open(state, "w") as f:
            f.write("count=2\n1.sm_clock=990\n1.max_sm_clock=1980\n1.clock_reasons=0x40\n")
        stop = os.path.join(self.dir, "stop")
        p = start(["--standalone", "--nproc-per-node=2", "--no-python", "sh", "-c",
                   f"while [ ! -e {stop} ]; do sleep 0.2; done"],
                  env=clean_env(CXXRUN_NVML_LIBRARY=FAKE_NVML, FAKE_NVML_STATE=state))
        self.addCleanup(end, p)
        err = Output(p)
        wait_for(lambda: err.first("straggler: rank 1 on"), timeout=NAMED_IN_TESTS,
                 what="rank 1, whose GPU is throttled, to be named")
        line = err.first("straggler: rank 1 on")[1]
        self.assertIn("runs its GPU 2.0x slower than the median rank (SM clock at 50 % of its maximum against "
                      "100 %); its GPU is throttled (thermal): SM clock at 50 % of its maximum", line)
        open(stop, "w").close()
        self.assertEqual(p.wait(timeout=60), 0, err.text())
        self.assertIsNone(err.first("straggler: rank 0 on"), err.text())


if __name__ == "__main__":
    unittest.main()
