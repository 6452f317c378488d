"""The load generators' command lines (bench/args.h, one loop for all five):
every name each one documents is taken, an unknown one is refused in one line
naming the program, exit 2."""
import os
import subprocess
import unittest

BENCH = os.environ.get("CXXRUN_BENCH", "")  # the build's bench/ (tests/CMakeLists.txt)
# Each generator's names, with values that pass as arguments but leave --port
# invalid, so the run stops at the generator's own check, before any socket.
NAMES = {
    "store_load": ["--host", "127.0.0.1", "--clients", "2", "--threads", "1", "--seconds", "1",
                   "--value-bytes", "8", "--protocol", "modern", "--port", "0"],
    "connect_storm": ["--host", "127.0.0.1", "--clients", "2", "--per-source", "2", "--max-open", "0",
                      "--value-bytes", "8", "--timeout", "1", "--server-pid", "0", "--port", "0"],
    "rdzv_sim": ["--host", "127.0.0.1", "--nodes", "2", "--nproc", "1", "--timeout", "1", "--recover", "1",
                 "--port", "0"],
    "rdzv_load": ["--host", "127.0.0.1", "--nodes", "2", "--nproc", "1", "--recover", "1", "--procs", "1",
                  "--timeout", "1", "--spread", "0", "--keep-alive", "0.5", "--port", "0"],
    # No --port: its members are --etcd's, here one that is not an address.
    "etcd_sim": ["--nodes", "2", "--nproc", "1", "--procs", "1", "--timeout", "1", "--recover", "1",
                 "--spread", "1", "--keep-alive", "0.5", "--master-in-assignment", "1",
                 "--etcd", "nowhere"],
}
# Where each generator's own check starts its line.
REFUSAL = {"etcd_sim": "etcd_sim: --etcd IP:PORT"}


@unittest.skipIf(not os.path.isdir(BENCH), f"no bench programs in {BENCH}")
class BenchArgs(unittest.TestCase):
    def run_bench(self, program, args):
        p = subprocess.run([os.path.join(BENCH, program)] + args, capture_output=True, text=True, timeout=30)
        return p.returncode, p.stderr

    def test_every_documented_name_is_taken(self):
        for program, args in NAMES.items():
            rc, err = self.run_bench(program, args)
            self.assertEqual(rc, 2, (program, err))
            self.assertNotIn("unknown argument", err, program)
            self.assertTrue(err.startswith(REFUSAL.get(program, f"{program}: --port P")), (program, err))

    def test_an_unknown_name_is_one_line_naming_the_program(self):
        for program in NAMES:
            rc, err = self.run_bench(program, NAMES[program][:2] + ["--bogus", "1"])
            self.assertEqual((rc, err), (2, f"{program}: unknown argument --bogus\n"), program)


if __name__ == "__main__":
    unittest.main()
