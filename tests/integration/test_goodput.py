"""Goodput (docs/restarts.md, agent/progress/goodput.h): a scripted job of known
phases, and what the agent says of it: the line at the exit, the event log's
cxxrun.agent.PHASE spans and cxxrun.agent.GOODPUT totals, /metrics while it
runs. Bounds come from the script's sleeps (a sleep lasts at least its
length), never from how fast the machine is."""
import json
import os
import re
import urllib.request

from harness import EXAMPLES, TempDirTest, free_port, run

PHASES = ["rendezvous", "startup", "productive", "lost", "hang_detection", "teardown", "waiting"]
WORDS = {"lost to failures": "lost", "hang detection": "hang_detection"}
LINE = re.compile(r"goodput (\d+\.\d)% of (\d+\.\d) s: productive (\d+\.\d) s((?:; |, )[^\n]*)?$", re.M)

# Each attempt starts for a second before its first step. Attempt 0 makes
# steps 1-3 (0.2 s apart), writes a checkpoint, goes on 2.5 s and fails;
# attempt 1 makes steps 1-8 and succeeds.
SCRIPT = """
sleep 1
for i in 1 2 3; do echo "step $i"; sleep 0.2; done
if [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then
  mkdir -p {ckpt}/step_3
  for i in 4 5 6 7 8; do sleep 0.5; echo "step $i"; done
  exit 1
fi
for i in 4 5 6 7 8; do echo "step $i"; sleep 0.2; done
"""


def parse_line(err):
    """The goodput line: (percent, wall, {phase: seconds}, the rest of the line)."""
    found = LINE.findall(err)
    assert len(found) == 1, err
    percent, wall, productive, rest = found[0]
    seconds = {"productive": float(productive)}
    for words, value in re.findall(r"(?:; |, )([a-z ]+) (\d+\.\d) s", rest or ""):
        seconds[WORDS.get(words, words)] = float(value)
    return float(percent), float(wall), seconds, rest or ""


def agent_events(path, name):
    with open(path) as f:
        found = [json.loads(line) for line in f if line.strip()]
    return [(e["metadata"]["duration_ms"], json.loads(e["metadata"]["metadata"])) for e in found if e["name"] == name]


class Goodput(TempDirTest):
    def test_a_scripted_job_is_accounted_by_its_known_phases(self):
        ckpt = os.path.join(self.dir, "ckpt")
        prog = self.script("job.sh", SCRIPT.format(ckpt=ckpt))
        log = os.path.join(self.dir, "events.jsonl")
        rc, out, err = run(["--nproc-per-node=1", "--max-restarts=1", r"--progress-pattern=step (\d+)",
                            f"--checkpoint-dir={ckpt}", f"--event-log={log}", prog], timeout=90)
        self.assertEqual(rc, 0, err)

        # The line: phases that round to nothing are left out; what is shown
        # sums to the wall time within its rounding.
        percent, wall, seconds, rest = parse_line(err)
        self.assertNotIn("no progress source", rest)
        self.assertGreaterEqual(seconds.get("startup", 0), 1.8, err)  # a second before each attempt's first step
        self.assertGreaterEqual(seconds["productive"], 1.9, err)  # attempt 0 to its checkpoint, attempt 1 after step 1
        self.assertGreater(seconds.get("lost", 0), 0, err)  # attempt 0 after its checkpoint
        self.assertNotIn("hang_detection", seconds)
        self.assertAlmostEqual(sum(seconds.values()), wall, delta=0.05 * len(PHASES))
        self.assertAlmostEqual(percent, 100 * seconds["productive"] / wall, delta=2)
        self.assertLess(err.index("all 1 workers succeeded"), err.index("goodput "))

        # GOODPUT: the same totals, every phase named, summing to the wall.
        [(_, g)] = agent_events(log, "cxxrun.agent.GOODPUT")
        self.assertEqual(sorted(k for k in g if k.endswith("_ms")), sorted([p + "_ms" for p in PHASES] + ["wall_ms"]))
        self.assertAlmostEqual(sum(g[p + "_ms"] for p in PHASES), g["wall_ms"], delta=1)
        self.assertAlmostEqual(g["goodput"], g["productive_ms"] / g["wall_ms"], places=6)
        self.assertAlmostEqual(g["wall_ms"] / 1000, wall, delta=0.051)
        for p in PHASES:
            self.assertAlmostEqual(g[p + "_ms"] / 1000, seconds.get(p, 0), delta=0.051, msg=p)
        self.assertEqual(g["hang_detection_ms"], 0)

        # PHASE: spans that tile the wall time, each from where the last
        # ended; attempt 0 lost its work after the checkpoint, attempt 1 none.
        spans = agent_events(log, "cxxrun.agent.PHASE")
        self.assertTrue(spans)
        for (_, before), (_, after) in zip(spans, spans[1:]):
            self.assertEqual(after["start_ms"], before["end_ms"], (before, after))
        for duration, s in spans:
            self.assertLessEqual(s["start_ms"], s["end_ms"])
            self.assertAlmostEqual(duration, s["end_ms"] - s["start_ms"], delta=1)
        self.assertAlmostEqual(sum(d for d, _ in spans), g["wall_ms"], delta=1)
        self.assertAlmostEqual(spans[-1][1]["end_ms"] - spans[0][1]["start_ms"], g["wall_ms"], delta=2)
        for p in PHASES:
            self.assertAlmostEqual(sum(d for d, s in spans if s["phase"] == p), g[p + "_ms"], delta=1, msg=p)
        order = lambda attempt: [s["phase"] for _, s in spans if s["attempt"] == attempt
                                 and s["phase"] in ("startup", "productive", "lost")]
        self.assertEqual(order(0), ["startup", "productive", "lost"])
        self.assertEqual(order(1), ["startup", "productive"])
        self.assertIn("rendezvous", [s["phase"] for _, s in spans])

    def test_metrics_show_every_phase_while_the_job_runs(self):
        port = free_port()
        prog = self.script("job.sh", f"""
sleep 0.5
echo "step 1"
sleep 0.5
python3 - <<'PY'
import urllib.request
with open("{self.dir}/metrics", "wb") as f:
    f.write(urllib.request.urlopen("http://127.0.0.1:{port}/metrics", timeout=10).read())
PY
""")
        rc, out, err = run(["--nproc-per-node=1", f"--health-port={port}", r"--progress-pattern=step (\d+)", prog],
                           timeout=60)
        self.assertEqual(rc, 0, err)
        with open(f"{self.dir}/metrics") as f:
            text = f.read()
        self.assertIn("# TYPE cxxrun_phase_seconds gauge", text)
        self.assertIn("# TYPE cxxrun_goodput_ratio gauge", text)
        seconds = {m[0]: float(m[1]) for m in re.findall(r'^cxxrun_phase_seconds\{phase="(\w+)"\} (\S+)$',
                                                         text, re.M)}
        self.assertEqual(sorted(seconds), sorted(PHASES))
        # Read after the first step, half a second after the spawn: the
        # running attempt counts as startup until then, productive after.
        self.assertGreaterEqual(seconds["startup"], 0.45, text)
        self.assertGreaterEqual(seconds["productive"], 0.45, text)
        [ratio] = re.findall(r"^cxxrun_goodput_ratio (\S+)$", text, re.M)
        self.assertAlmostEqual(float(ratio), seconds["productive"] / sum(seconds.values()), delta=0.05)

    def test_a_hung_workers_silence_is_hang_detection_and_the_summary_says_goodput(self):
        log = os.path.join(self.dir, "events.jsonl")
        rc, out, err = run(["--nproc-per-node=1", "--heartbeat-timeout=1", f"--event-log={log}",
                            os.path.join(EXAMPLES, "heartbeat_demo"), "--steps", "10", "--hang-at", "3",
                            "--timeout", "60"], timeout=60)
        self.assertEqual(rc, 240, err)  # a hang cxxrun killed
        percent, wall, seconds, rest = parse_line(err)
        # Silent for the heartbeat timeout at least before the verdict.
        self.assertGreaterEqual(seconds.get("hang_detection", 0), 1.0, err)
        [(_, g)] = agent_events(log, "cxxrun.agent.GOODPUT")
        self.assertGreater(g["lost_ms"], 0, err)  # steps 1-3, reported by the program, and no checkpoint
        # Right after the failure summary's box, before the exit.
        box_end = err.rindex("=" * 20)
        self.assertLess(box_end, err.index("goodput "))
        self.assertNotIn("exiting with code", err[box_end:err.index("goodput ")])
        self.assertAlmostEqual(g["hang_detection_ms"] / 1000, seconds["hang_detection"], delta=0.051)
        hang = [s for _, s in agent_events(log, "cxxrun.agent.PHASE") if s["phase"] == "hang_detection"]
        self.assertEqual(len(hang), 1)

    def test_without_a_progress_source_the_line_says_so(self):
        prog = self.script("job.sh", "sleep 0.3\n")
        rc, out, err = run(["--nproc-per-node=1", prog], timeout=60)
        self.assertEqual(rc, 0, err)
        percent, wall, seconds, rest = parse_line(err)
        self.assertIn("; no progress source: startup and lost work not known", rest)
        self.assertGreaterEqual(seconds["productive"], 0.3)
