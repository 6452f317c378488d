"""Drop-in for python -m torch.distributed.launch and torchrun's parser:
--append-local-rank gives scripts written for the old launcher the argument
they parse, and launcher options may be abbreviated as argparse allows."""
from harness import TempDirTest, clean_env, run

# What a torch.distributed.launch tutorial's script does: the local rank comes
# from argv, and the script cannot start without it (required, as in
# PyTorch's own launcher test script).
LAUNCH_PY = """import argparse, os
parser = argparse.ArgumentParser()
parser.add_argument("{option}", type=int, required=True)
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
print("local rank", args.{dest}, "env", os.environ["LOCAL_RANK"], "epochs", args.epochs, flush=True)
"""


class LaunchCompat(TempDirTest):
    def launch_script(self, option):
        path = f"{self.dir}/launch_{option.strip('-')}.py"
        with open(path, "w") as f:
            f.write(LAUNCH_PY.format(option=option, dest=option.strip("-").replace("-", "_")))
        return path

    def run_python(self, args):
        return run(args, env=clean_env(PYTHON_EXEC="/usr/bin/python3"))

    def test_dash_spelling_for_torch_2_scripts(self):
        script = self.launch_script("--local-rank")
        rc, out, err = self.run_python(["--nproc-per-node=2", "--append-local-rank", script, "--epochs", "3"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()),
                         ["[default0]:local rank 0 env 0 epochs 3", "[default1]:local rank 1 env 1 epochs 3"])

    def test_underscore_spelling_for_older_scripts(self):
        script = self.launch_script("--local_rank")
        rc, out, err = self.run_python(["--nproc_per_node=2", "--append-local-rank=underscore", script])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()),
                         ["[default0]:local rank 0 env 0 epochs 1", "[default1]:local rank 1 env 1 epochs 1"])

    def test_forkserver_workers_get_it_too(self):
        script = self.launch_script("--local-rank")
        rc, out, err = self.run_python(["--nproc-per-node=2", "--start-method=forkserver", "--preload=",
                                        "--append-local-rank", script])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()),
                         ["[default0]:local rank 0 env 0 epochs 1", "[default1]:local rank 1 env 1 epochs 1"])

    def test_without_the_flag_such_a_script_cannot_start(self):
        # What the flag is for: torchrun (and cxxrun by default) pass the
        # local rank only in LOCAL_RANK.
        script = self.launch_script("--local-rank")
        rc, out, err = self.run_python(["--nproc-per-node=2", script])
        self.assertNotEqual(rc, 0, out)
        self.assertIn("the following arguments are required: --local-rank", err)

    def test_abbreviated_launcher_options(self):
        script = self.launch_script("--local_rank")
        rc, out, err = self.run_python(["--nproc=2", "--redirect=0", "--append=underscore", script,
                                        "--epochs", "2"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(sorted(out.splitlines()),
                         ["[default0]:local rank 0 env 0 epochs 2", "[default1]:local rank 1 env 1 epochs 2"])

    def test_program_options_are_not_abbreviations(self):
        rc, out, err = run(["--nproc=1", "--no-python", "echo", "--nproc=3", "--r"])
        self.assertEqual(rc, 0, err)
        self.assertEqual(out, "[default0]:--nproc=3 --r\n")
