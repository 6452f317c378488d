"""python -m cxxrun.timeline (agent/python/cxxrun/timeline.py): what it
reads from an event log (phases, verdicts, failures, restarts; the fallback
for a log without PHASE events; rows per node), that it draws a PNG, and
that bad input is one line and exit 2. The logs are written here as the
agent writes them (agent/report/event_log.h)."""
import json
import os
import subprocess
import sys

import pytest

from conftest import PACKAGE_DIR

from cxxrun import timeline

T0 = 1_795_777_000_000  # ms since the epoch


def event(name, at, host="node-a", group_rank=0, restarts=0, source="AGENT", rank=None, pid=None,
          raw_error=None, duration_ms=None, **extra):
    """One line as EventLog writes it: extras in the inner JSON string."""
    md = {"run_id": "job", "global_rank": rank, "group_rank": group_rank, "worker_id": pid, "role": "default",
          "hostname": host, "state": name.rsplit(".", 1)[-1], "total_run_time": 0, "rdzv_backend": "c10d",
          "raw_error": raw_error, "metadata": json.dumps({"group_world_size": 2, "entry_point": "train.py", **extra}),
          "agent_restarts": restarts, "duration_ms": duration_ms}
    return {"name": name, "source": source, "timestamp": T0 + at, "metadata": md}


def worker(state, at, rank, local_rank, pid, **kw):
    return event(f"torchelastic.worker.status.{state}", at, source="WORKER", rank=rank, pid=str(pid),
                 local_rank=local_rank, **kw)


def phase(name, start, end, attempt, **kw):
    return event("cxxrun.agent.PHASE", end, restarts=attempt, duration_ms=end - start, phase=name, attempt=attempt,
                 start_ms=T0 + start, end_ms=T0 + end, **kw)


NAN_DETAIL = ('exception: a Python traceback on stderr: ValueError: loss is NaN; in its own code at '
              '/job/train.py:61 in step: raise ValueError("loss is NaN")')


def failed(at, rank, local_rank, pid, restarts=0, **kw):
    raw = json.dumps({"message": f"rank {rank} (local_rank {local_rank}, pid {pid}) exited with code 1: {NAN_DETAIL}"})
    return worker("FAILED", at, rank, local_rank, pid, restarts=restarts, raw_error=raw, cause="exception",
                  cause_detail=NAN_DETAIL, exit_code=1, **kw)


def write(path, events):
    with open(path, "w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")
    return str(path)


def phased_job():
    """Two nodes, one failure (rank 3 on node-b), a restart verdict, a
    second attempt that succeeds, the goodput at exit."""
    out = []
    for host, g in (("node-a", 0), ("node-b", 1)):
        kw = dict(host=host, group_rank=g)
        out += [phase("rendezvous", 0, 1000, 0, **kw), phase("startup", 1000, 3000, 0, **kw),
                phase("productive", 3000, 8000, 0, **kw), phase("lost", 8000, 10000, 0, **kw),
                phase("teardown", 10000, 10500, 0, **kw),
                event("cxxrun.agent.VERDICT", 10400, attempt=0, verdict="restart",
                      cause="ValueError: loss is NaN (train.py:61) at step 30", repeats=1, evidence="first time", **kw),
                event("cxxrun.agent.RESTART", 10500 + 10 * g, restarts=1, reason="rank 3 failed", **kw),
                phase("rendezvous", 10500, 11500, 1, **kw), phase("productive", 11500, 20000, 1, **kw),
                event("cxxrun.agent.GOODPUT", 20000, restarts=1, goodput=0.65, wall_ms=20000, **kw)]
        out += [worker("START", 1000, 2 * g + lr, lr, 100 + 2 * g + lr, **kw) for lr in (0, 1)]
    out.append(failed(10000, 3, 1, 103, host="node-b", group_rank=1))
    return out


def old_job():
    """A log from before PHASE events: one node, rank 1 fails, a restart,
    the second attempt succeeds; ATTEMPT_PROGRESS of the first."""
    return [event("torchelastic.worker.status.RENDEZVOUS", 0),
            worker("START", 15, 0, 0, 11), worker("START", 18, 1, 1, 12),
            worker("TERMINATED", 650, 0, 0, 11), failed(650, 1, 1, 12),
            event("cxxrun.agent.ATTEMPT_PROGRESS", 650, duration_ms=635, attempt=0, first_progress_ms=200, step=30,
                  checkpoint_step=20),
            event("cxxrun.agent.RESTART", 651, restarts=1),
            event("torchelastic.worker.status.RENDEZVOUS", 700, restarts=1),
            worker("START", 710, 0, 0, 21, restarts=1), worker("START", 712, 1, 1, 22, restarts=1),
            worker("SUCCEEDED", 1300, 0, 0, 21, restarts=1), worker("SUCCEEDED", 1320, 1, 1, 22, restarts=1),
            event("torchelastic.worker.status.SUCCEEDED", 1320, restarts=1)]


def parse(tmp_path, *logs):
    paths = [write(tmp_path / f"log{i}.jsonl", events) for i, events in enumerate(logs)]
    return timeline.build(timeline.read_events(paths), paths)


def test_phase_events_are_the_bars(tmp_path):
    t = parse(tmp_path, phased_job())
    assert [r.label for r in t.rows] == ["node-a node 0\ngoodput 65%", "node-b node 1\ngoodput 65%"]
    assert t.from_phases
    a = t.rows[0].key
    assert [(s.phase, s.start_ms - T0, s.end_ms - T0, s.attempt) for s in t.spans if s.row == a] == [
        ("rendezvous", 0, 1000, 0), ("startup", 1000, 3000, 0), ("productive", 3000, 8000, 0),
        ("lost", 8000, 10000, 0), ("teardown", 10000, 10500, 0), ("rendezvous", 10500, 11500, 1),
        ("productive", 11500, 20000, 1)]
    assert not any(s.phase == "running" for s in t.spans)
    assert t.attempts == [0, 1]
    assert (t.t0_ms, t.t1_ms) == (T0, T0 + 20000)
    # The first node's RESTART is the line.
    assert t.restarts == [(1, T0 + 10500)]


def test_failures_and_verdicts_are_marked_with_their_cause(tmp_path):
    t = parse(tmp_path, phased_job())
    b = t.rows[1].key
    [fail] = [m for m in t.marks if m.kind == "failed"]
    assert (fail.row, fail.at_ms - T0, fail.attempt) == (b, 10000, 0)
    assert fail.text == "rank 3: ValueError: loss is NaN (train.py:61)"
    verdicts = [m for m in t.marks if m.kind == "verdict"]
    assert len(verdicts) == 2
    assert verdicts[0].text == "restart: ValueError: loss is NaN (train.py:61) at step 30"


def test_a_stop_verdict_says_how_often_the_cause_repeated(tmp_path):
    t = parse(tmp_path, [event("cxxrun.agent.VERDICT", 5, attempt=2, verdict="stop", cause="SIGSEGV in libfoo.so",
                               repeats=3, evidence="no progress beyond step 30")])
    [m] = t.marks
    assert (m.text, m.attempt) == ("stop: SIGSEGV in libfoo.so (3 in a row)", 2)


def test_an_old_log_draws_what_its_worker_events_prove(tmp_path):
    t = parse(tmp_path, old_job())
    assert not t.from_phases
    assert [r.label for r in t.rows] == ["node-a node 0"]
    spans = [(s.phase, s.start_ms - T0, s.end_ms - T0, s.attempt) for s in t.spans]
    # Attempt 0: startup to first progress (ATTEMPT_PROGRESS), then running
    # to its last worker's end; the round after the restart; attempt 1.
    # The first round has no duration: no bar is made up for it.
    assert spans == [("rendezvous", 651, 700, 1), ("startup", 15, 215, 0), ("running", 215, 650, 0),
                     ("running", 710, 1320, 1)]
    assert t.attempts == [0, 1]
    assert t.restarts == [(1, T0 + 651)]
    # The failure with its cause; the step the attempt reached, at its end.
    assert [(m.kind, m.text, m.at_ms - T0, m.attempt) for m in t.marks] == [
        ("failed", "rank 1: ValueError: loss is NaN (train.py:61)", 650, 0),
        ("progress", "step 30, checkpoint 20", 650, 0)]


def test_hangs_unhealthy_nodes_and_agent_failures_are_marked(tmp_path):
    t = parse(tmp_path, [
        worker("UNHEALTHY", 100, 2, 0, 7, reason="local rank 0: no heartbeat for 31.0 s (timeout 30.0 s)"),
        event("cxxrun.agent.NODE_UNHEALTHY", 200, raw_error="health-check: " + "GPU 3 fell off the bus; " * 10),
        event("torchelastic.worker.status.FAILED", 300, raw_error="SIGTERM while stopping the workers")])
    assert [(m.kind, m.text) for m in t.marks] == [
        ("hung", "rank 2 hung: local rank 0: no heartbeat for 31.0 s (timeout 30.0 s)"),
        ("unhealthy", "node unhealthy: health-check: GPU 3 fell off the bus; GPU 3 fell off the bus;..."),
        ("agent-failed", "agent failed: SIGTERM while stopping the workers")]


def test_causes_from_each_kind_of_failure():
    def cause(raw=None, **extra):
        return timeline.short_cause(worker("FAILED", 0, 2, 0, 5, raw_error=raw, **extra))

    # torch's error file (@record), nested as torch writes it.
    torch_file = {"message": {"message": "RuntimeError: CUDA error: an illegal memory access",
                              "extraInfo": {"py_callstack": "...", "timestamp": "1"}}}
    assert cause(json.dumps(torch_file)) == "RuntimeError: CUDA error: an illegal memory access"
    assert cause(json.dumps({"message": "rank 2 (local_rank 0, pid 5) killed by signal 11"}), signal=11) == \
        "killed by signal 11"
    assert cause(None, exit_code=3) == "exit code 3"
    assert cause(None, signal=9) == "signal 9"
    assert cause(None, cause="oom-killed", cause_detail="oom-killed: the OOM killer killed it; limit 1 GiB") == \
        "the OOM killer killed it"
    assert len(cause(json.dumps({"message": "x" * 300}))) == 80


def test_rows_follow_the_host_across_rank_changes_and_files(tmp_path):
    # node-b is group rank 1, then 0 after a re-rendezvous: one row.
    moved = [event("torchelastic.worker.status.RENDEZVOUS", 0, host="node-b", group_rank=1),
             event("torchelastic.worker.status.RENDEZVOUS", 500, host="node-b", group_rank=0, restarts=1)]
    t = parse(tmp_path, moved)
    assert [r.label for r in t.rows] == ["node-b node 1 then 0"]
    # Two agents on one host, one file each (a loopback job): two rows,
    # each naming its file.
    t = parse(tmp_path, old_job(), old_job())
    assert [r.label for r in t.rows] == ["node-a node 0 (log0.jsonl)", "node-a node 0 (log1.jsonl)"]


def test_two_agents_of_one_host_in_one_file_split_by_group_rank(tmp_path):
    second = [worker("START", 20, 2, 0, 31, group_rank=1), worker("START", 20, 3, 1, 32, group_rank=1),
              worker("SUCCEEDED", 600, 2, 0, 31, group_rank=1)]
    t = parse(tmp_path, old_job() + second)
    assert [r.label for r in t.rows] == ["node-a node 0", "node-a node 1"]
    assert [(s.start_ms - T0, s.end_ms - T0) for s in t.spans if s.row == t.rows[1].key] == [(20, 600)]


def run_module(*args, env_extra=None):
    env = dict(os.environ, PYTHONPATH=PACKAGE_DIR, PYTHONDONTWRITEBYTECODE="1")
    env.update(env_extra or {})
    return subprocess.run([sys.executable, "-m", "cxxrun.timeline", *args], capture_output=True, text=True,
                          env=env, timeout=120)


def test_it_writes_a_png_and_says_so(tmp_path):
    pytest.importorskip("matplotlib")
    log = write(tmp_path / "events.jsonl", phased_job())
    p = run_module(log, "--title", "two nodes")
    assert p.returncode == 0, p.stderr
    png = tmp_path / "events.png"  # next to the log by default
    assert p.stdout == f"cxxrun.timeline: wrote {png}: 2 node(s), 2 attempt(s), 20.0 s (phases from PHASE events)\n"
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # bars, labels and a legend, not an empty canvas
    p = run_module(write(tmp_path / "old.jsonl", old_job()), "-o", str(tmp_path / "old-job.png"))
    assert p.returncode == 0, p.stderr
    assert "1 node(s), 2 attempt(s), 1.3 s (no PHASE events" in p.stdout
    assert (tmp_path / "old-job.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def one_line_exit_2(p, *wanted):
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert p.stdout == ""
    assert p.stderr.count("\n") == 1 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.startswith("cxxrun.timeline: ")
    for w in wanted:
        assert w in p.stderr


def test_bad_input_is_one_line_and_exit_2(tmp_path):
    missing = str(tmp_path / "nope.jsonl")
    one_line_exit_2(run_module(missing), missing, "cannot read it", "--event-log")
    empty = write(tmp_path / "empty.jsonl", [])
    one_line_exit_2(run_module(empty), empty, "no events")
    text = tmp_path / "text.jsonl"
    text.write_text(json.dumps(old_job()[0]) + "\nnot json\n")
    one_line_exit_2(run_module(str(text)), f"{text}:2: not JSON", "one JSON event per line")
    other = tmp_path / "other.jsonl"
    other.write_text('{"a": 1}\n')
    one_line_exit_2(run_module(str(other)), f"{other}:1: not an event")
    one_line_exit_2(run_module(), "the following arguments are required: events")
    good = write(tmp_path / "good.jsonl", old_job())
    one_line_exit_2(run_module(good, "-o", str(tmp_path / "no" / "dir" / "x.png")), "x.png: cannot write it")


def test_without_matplotlib_it_says_so(tmp_path):
    # A matplotlib that cannot be imported, first on the path.
    shadow = tmp_path / "shadow" / "matplotlib"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('no matplotlib here')\n")
    good = write(tmp_path / "good.jsonl", old_job())
    p = run_module(good, env_extra={"PYTHONPATH": f"{shadow.parent}{os.pathsep}{PACKAGE_DIR}"})
    one_line_exit_2(p, "matplotlib cannot be imported", "python3-matplotlib")
    assert not (tmp_path / "good.png").exists()


def test_importing_it_imports_no_matplotlib():
    # Every worker's copy of the package holds this module: cheap to import.
    p = subprocess.run([sys.executable, "-c", "import sys, cxxrun.timeline; print('matplotlib' in sys.modules)"],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=PACKAGE_DIR), timeout=60)
    assert (p.returncode, p.stdout) == (0, "False\n"), p.stderr
