"""The man pages and shell completions the build generates (packaging/docgen.cc)
against what the programs themselves say in --help: `man cxxrun` lists every
flag --help lists, and completion offers every long option, for cxxrun and
cxxrun-rdzv. zsh is not on the test machines: its files are checked as text
(every long option is named), the bash ones are run in bash. And the map
against the tree: docs/architecture.md names every product header, the
README's layout every top-level directory, and no Python hides in a C++
string literal. And the exit codes of agent/exit_codes.h (240 up) against the
README's table, docs/exit-codes.md and the schedulers' examples."""
import glob
import os
import re
import shutil
import subprocess
import unittest

BUILD = os.path.dirname(os.path.dirname(os.environ.get("CXXRUN", "")))
SHARE = os.path.join(BUILD, "share")
PROGRAMS = {"cxxrun": os.environ.get("CXXRUN", ""),
            "cxxrun-rdzv": os.path.join(BUILD, "bin", "cxxrun-rdzv"),
            "cxxrunctl": os.path.join(BUILD, "bin", "cxxrunctl")}
# Fewer flags than this in --help means the parse of it broke.
AT_LEAST = {"cxxrun": 60, "cxxrun-rdzv": 4, "cxxrunctl": 10}


def help_flags(program):
    """Every -x and --long spelling --help lists."""
    out = subprocess.run([PROGRAMS[program], "--help"], capture_output=True, text=True, timeout=10).stdout
    flags = set()
    for line in out.splitlines():
        stripped = line.strip()
        if not stripped.startswith("-"):
            continue  # a flag in a description is not a listing
        head = re.split(r"\s{2,}", stripped)[0]
        flags.update(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", head))
    return flags


def long_flags(program):
    return {f for f in help_flags(program) if f.startswith("--")}


def bash_complete(program, words):
    """COMPREPLY of the generated bash completion for the command line `words`
    (the last word is the one being completed)."""
    script = (f"source {os.path.join(SHARE, 'bash-completion', 'completions', program)}\n"
              f"COMP_WORDS=({' '.join(repr(w) for w in [program] + words)})\n"
              f"COMP_CWORD={len(words)}\n"
              f"_{program.replace('-', '_')}\n"
              'printf "%s\\n" "${COMPREPLY[@]}"\n')
    p = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=10)
    return {w for w in p.stdout.splitlines() if w}


@unittest.skipIf(not os.path.isdir(SHARE), f"no generated docs in {SHARE} (the build's `docs` target)")
class ManPages(unittest.TestCase):
    def render(self, program):
        page = os.path.join(SHARE, "man", "man1", f"{program}.1")
        if shutil.which("man"):
            cmd = ["man", "-l", page]
        else:
            cmd = ["groff", "-man", "-Tascii", page]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=30,
                           env=dict(os.environ, MANWIDTH="200", LANG="C", MAN_KEEP_FORMATTING="0"))
        self.assertEqual(p.returncode, 0, p.stderr)
        return re.sub(r".\x08", "", p.stdout)  # overstrikes from bold and underline

    def check(self, program):
        flags = help_flags(program)
        self.assertGreater(len(flags), AT_LEAST[program])
        text = self.render(program)
        listed = set(re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", text))
        self.assertEqual(sorted(flags - listed), [], f"in `{program} --help` but not in man {program}")

    def test_man_cxxrun_lists_every_flag_of_its_help(self):
        self.check("cxxrun")

    def test_man_cxxrun_rdzv_lists_every_flag_of_its_help(self):
        self.check("cxxrun-rdzv")

    def test_man_cxxrunctl_lists_every_flag_of_its_help_and_every_command(self):
        self.check("cxxrunctl")
        text = " ".join(self.render("cxxrunctl").split())
        for command in ("status", "top", "logs", "stacks", "stop"):
            self.assertIn(f" {command}", text)
        self.assertIn("PET_RDZV_ENDPOINT", text)

    def test_start_method_says_what_the_default_does_now(self):
        # Not given, a script that imports torch at its top level forks its
        # workers from the first attempt on (agent/warm/forkserver.h): --help and
        # the page made from the same row say so, not that it starts as spawn.
        said = "forks every worker, the first attempt's too, from one interpreter that imported torch once"
        out = subprocess.run([PROGRAMS["cxxrun"], "--help"], capture_output=True, text=True, timeout=10).stdout
        self.assertIn(said, " ".join(out.split()))
        self.assertIn(said, " ".join(re.sub(r"-\n\s*", "-", self.render("cxxrun")).split()))

    def test_man_pages_name_the_environment(self):
        text = self.render("cxxrun")
        self.assertIn("PET_NPROC_PER_NODE", text)
        self.assertIn("EXIT STATUS", text)
        self.assertIn("CXXRUN_RDZV_PORT", self.render("cxxrun-rdzv"))


@unittest.skipIf(not os.path.isdir(SHARE) or shutil.which("bash") is None, "no generated completions or no bash")
class Completion(unittest.TestCase):
    def test_bash_offers_every_long_option(self):
        for program in PROGRAMS:
            offered = bash_complete(program, ["--"])
            self.assertEqual(sorted(long_flags(program) - offered), [], program)

    def test_bash_completes_a_prefix_and_fixed_values(self):
        self.assertEqual(bash_complete("cxxrun", ["--start-m"]), {"--start-method"})
        self.assertEqual(bash_complete("cxxrun", ["--start-method", ""]), {"spawn", "fork", "forkserver"})
        self.assertEqual(bash_complete("cxxrun", ["--tty", "a"]), {"auto", "always"})

    def test_bash_leaves_the_program_and_its_arguments_to_files(self):
        # After the program word, or a value-taking option's value, nothing
        # of cxxrun's: bash's default (file) completion takes over.
        self.assertEqual(bash_complete("cxxrun", ["--nnodes", "2", "train.py", "--"]), set())
        self.assertEqual(bash_complete("cxxrun", ["--", "--"]), set())
        self.assertEqual(bash_complete("cxxrun", ["--nnodes", ""]), set())
        self.assertIn("--nproc-per-node", bash_complete("cxxrun", ["--nnodes", "2", "--nproc"]))

    def test_bash_completes_cxxrunctl_commands_and_backends(self):
        self.assertEqual(bash_complete("cxxrunctl", ["st"]), {"status", "stacks", "stop"})
        self.assertEqual(bash_complete("cxxrunctl", ["--rdzv-endpoint", "h:1", "l"]), {"logs"})
        self.assertEqual(bash_complete("cxxrunctl", ["--rdzv-backend", "e"]), {"etcd-v3", "etcd", "etcd-v2"})
        self.assertEqual(bash_complete("cxxrunctl", ["--token-file", ""]), set())  # a file

    def test_zsh_names_every_long_option(self):
        for program in PROGRAMS:
            with open(os.path.join(SHARE, "zsh", "vendor-completions", f"_{program}")) as f:
                text = f.read()
            self.assertTrue(text.startswith(f"#compdef {program}\n"))
            named = set(re.findall(r"^  '(--[\w-]+)", text, re.M))
            self.assertEqual(sorted(long_flags(program) - named), [], program)


SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PRODUCT = ["launcher", "ctl", "agent", "rendezvous", "store", "net", "etcd", "worker_runtime", "common"]


def include_circles(root, folders):
    """Every set of units (foo.h + foo.cc) that include one another, by
    Tarjan's strongly connected components over the project's own includes."""
    include = re.compile(r'^#include "([\w/]+)\.h"', re.M)
    edges = {}
    for folder in folders:
        for path in glob.glob(os.path.join(root, folder, "**", "*.*"), recursive=True):
            if not path.endswith((".h", ".cc")):
                continue
            unit = os.path.relpath(path, root).rsplit(".", 1)[0]
            with open(path) as f:
                targets = include.findall(f.read())
            edges.setdefault(unit, set()).update(
                t for t in targets if t != unit and os.path.exists(os.path.join(root, t + ".h")))
    index, low, stack, on_stack, circles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            circle = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                circle.append(w)
                if w == v:
                    break
            if len(circle) > 1:
                circles.append(sorted(circle))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(circles)


def product_headers():
    """Every .h of the product, as the map spells it ("agent/process/spawn.h")."""
    found = []
    for component in PRODUCT:
        for path in glob.glob(os.path.join(SOURCE, component, "**", "*.h"), recursive=True):
            found.append(os.path.relpath(path, SOURCE))
    return sorted(found)


class Map(unittest.TestCase):
    def test_architecture_names_every_product_header(self):
        with open(os.path.join(SOURCE, "docs", "architecture.md")) as f:
            text = f.read()
        headers = product_headers()
        self.assertIn("agent/agent.h", headers)  # the glob found the tree
        unnamed = [h for h in headers if not re.search(r"(?<![\w/])" + re.escape(h) + r"(?![\w.])", text)]
        self.assertEqual(unnamed, [], "docs/architecture.md does not name these headers: add each where it belongs")

    def test_no_python_in_a_cxx_string_literal(self):
        """Python is written as .py files (agent/python/, embedded at build
        time by agent/python/CMakeLists.txt), never in a C++ string: neither a
        raw string nor lines of Python in ordinary literals ("import sys\\n")."""
        sources = []
        for component in PRODUCT:
            for ext in ("*.cc", "*.h", "*.in"):
                sources += glob.glob(os.path.join(SOURCE, component, "**", ext), recursive=True)
        self.assertIn(os.path.join(SOURCE, "agent", "python", "hook.cc"), sources)  # the glob found the tree
        python_line = re.compile(r'^\s*(import \w|from [\w.]+ import |def \w+\(|class \w+.*:$|""")', re.M)
        found = []
        for path in sources:
            with open(path) as f:
                text = f.read()
            for m in re.finditer(r'R"([^()\\\s"]{0,16})\((.*?)\)\1"', text, re.S):
                if m.group(1).lower() == "py" or python_line.search(m.group(2)):
                    found.append(f"{os.path.relpath(path, SOURCE)}: R\"{m.group(1)}(")
            for m in re.finditer(r'"((?:import \w|from [\w.]+ import |def \w+\()[^"\n]*\\n)"', text):
                found.append(f"{os.path.relpath(path, SOURCE)}: \"{m.group(1)}\"")
        self.assertEqual(found, [], "Python in a C++ string: move it to a file of agent/python/")

    def test_no_include_points_back_up_a_floor(self):
        """A header and its source are one unit; a unit that includes
        another's header sits above it. No include may close a circle: a
        piece carved out of a unit must not include that unit back (the
        shared types go in a header below both), in any folder of the
        product, the agent's wings included."""
        self.assertEqual(include_circles(SOURCE, PRODUCT + ["bench", "examples"]), [],
                         "these units include each other (docs/architecture.md: types live under their seams)")

    def test_readme_layout_names_every_top_level_directory(self):
        with open(os.path.join(SOURCE, "README.md")) as f:
            text = f.read()
        layout = text.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
        # Hidden ones (.git, .ci) and build trees aside.
        dirs = sorted(d for d in os.listdir(SOURCE) if os.path.isdir(os.path.join(SOURCE, d))
                      and not d.startswith((".", "build")))
        self.assertIn("net", dirs)
        unnamed = [d for d in dirs if f"`{d}/`" not in layout]
        self.assertEqual(unnamed, [], "README.md's Layout does not name these directories")



def header_codes():
    """agent/exit_codes.h's codes of their own (240 and up): {value: [names]}."""
    with open(os.path.join(SOURCE, "agent", "exit_codes.h")) as f:
        text = f.read()
    codes = {}
    for name, value in re.findall(r"^constexpr int (\w+) = (\d+);", text, re.M):
        if int(value) >= 240:
            codes.setdefault(int(value), []).append(name)
    return codes


class ExitCodes(unittest.TestCase):
    """The codes cxxrun gives for causes outside the program (240 up,
    agent/exit_codes.h) against everything that tells users and schedulers
    about them: each is in the README's table and docs/exit-codes.md's, and
    the Kubernetes and Slurm examples decide on each; no document names one
    the header lacks."""

    def setUp(self):
        self.codes = sorted(header_codes())
        self.assertGreaterEqual(len(self.codes), 5)  # the parse found the header's

    def read(self, *path):
        with open(os.path.join(SOURCE, *path)) as f:
            return f.read()

    def test_the_readme_table(self):
        section = self.read("README.md").split("\n## Exit codes\n", 1)[1].split("\n## ", 1)[0]
        listed = sorted({int(m) for m in re.findall(r"\| (2[4-5]\d) \|$", section, re.M)})
        self.assertEqual(listed, self.codes, "README.md's exit-code table and agent/exit_codes.h differ")

    def test_the_exit_codes_page(self):
        text = self.read("docs", "exit-codes.md")
        table = text.split("\n## The codes\n", 1)[1].split("\n#", 1)[0]
        listed = sorted({int(m) for m in re.findall(r"^\| \*\*(2[4-5]\d)\*\* \|", table, re.M)})
        self.assertEqual(listed, self.codes, "docs/exit-codes.md's table and agent/exit_codes.h differ")
        block = f"{self.codes[0]}–{self.codes[-1]}"
        self.assertIn(f"{block} is above every signal", text)

    def test_the_kubernetes_policy_decides_on_each(self):
        text = self.read("examples", "kubernetes", "podfailurepolicy-job.yaml")
        decided = sorted({int(v) for values in re.findall(r"^\s+values: \[([\d, ]+)\]$", text, re.M)
                          for v in values.split(",") if int(v) >= 240})
        self.assertEqual(decided, self.codes, "a code of agent/exit_codes.h that the podFailurePolicy has no rule for")

    def test_the_slurm_requeue_script_says_what_it_does_with_each(self):
        text = self.read("examples", "slurm", "requeue.sbatch")
        said = sorted({int(m) for m in re.findall(r"^#   (2[4-5]\d)  ", text, re.M)})
        self.assertEqual(said, self.codes, "requeue.sbatch's header and agent/exit_codes.h differ")


if __name__ == "__main__":
    unittest.main()
