"""python -m cxxrun.timeline: a job's attempts drawn per node as a PNG, from
the event log that `cxxrun --event-log=FILE` writes (agent/report/event_log.h).

    python -m cxxrun.timeline events.jsonl -o job.png
    python -m cxxrun.timeline node0.jsonl node1.jsonl --title "run 42"

One row per node; bars are its phases, coloured by phase (the
cxxrun.agent.PHASE events; a log without them draws what its other events
prove: each attempt's workers running from START to their end, with the
startup to first progress from ATTEMPT_PROGRESS, and the rendezvous after a
restart); failures are marked where they happened with their cause (WORKER
FAILED and UNHEALTHY, NODE_UNHEALTHY, the agent's VERDICT before a restart);
dashed vertical lines are restarts. The x axis is seconds from the job's
first event. docs/restarts.md, "Timeline".

A row is a host within one input file: agents on different machines (or
each with its own file) get rows of their own, and a node keeps its row when
its group rank changes between rounds. Several agents of one host sharing
one file carry nothing that tells them apart but their group rank: when two
of them started the same local rank in one attempt, that host's row splits
by group rank.

Parsing (read_events, build) is apart from drawing (draw) so tests check
what was read. Nothing runs at import, and matplotlib is imported only to
draw: every worker's copy of the package holds this file.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from dataclasses import dataclass, field

PROG = "cxxrun.timeline"
RULE = "an event log is what cxxrun --event-log writes, one JSON event per line"

# Fixed per phase, so every picture reads the same.
COLOURS = {
    "rendezvous": "#9e9e9e",
    "startup": "#f2c14e",
    "productive": "#2e9e4f",
    "lost": "#d64545",
    "hang_detection": "#8e44ad",
    "teardown": "#5d6d7e",
    "waiting": "#d5dbdb",
    "running": "#5b8def",  # no PHASE events: the workers ran, split unknown
}
OTHER_COLOUR = "#bbbbbb"
WORKER_ENDS = ("SUCCEEDED", "FAILED", "TERMINATED")


class BadInput(Exception):
    """One line for the user: the file and the rule it broke."""


@dataclass
class Span:
    row: tuple
    phase: str
    start_ms: float
    end_ms: float
    attempt: int


@dataclass
class Mark:
    row: tuple
    kind: str  # failed, hung, unhealthy, agent-failed, verdict, progress (the step an attempt reached)
    at_ms: float
    text: str
    attempt: int


@dataclass
class Row:
    key: tuple
    host: str
    ranks: list = field(default_factory=list)  # group ranks in the order seen
    source: str = ""  # the input file, named when one host has rows in several
    goodput: float | None = None

    @property
    def label(self):
        label = f"{self.host} node {' then '.join(str(r) for r in self.ranks)}" if self.ranks else self.host
        if self.source:
            label += f" ({self.source})"
        if self.goodput is not None:
            label += f"\ngoodput {self.goodput:.0%}"
        return label


@dataclass
class Timeline:
    rows: list
    spans: list
    marks: list
    restarts: list  # (restart number, ms) at the first node that restarted
    attempts: list
    t0_ms: float
    t1_ms: float
    from_phases: bool  # every row's bars come from PHASE events


def read_events(paths):
    """[(file index, event)] from each file, in file order; BadInput for a
    file that cannot be read, holds no events or a line that is not one."""
    events = []
    for index, path in enumerate(paths):
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                lines = f.read().splitlines()
        except OSError as e:
            raise BadInput(f"{path}: cannot read it ({e.strerror or e}): {RULE}")
        found = 0
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                raise BadInput(f"{path}:{number}: not JSON: {RULE}")
            if not (isinstance(event, dict) and isinstance(event.get("name"), str)
                    and isinstance(event.get("timestamp"), (int, float))
                    and isinstance(event.get("metadata"), dict)):
                raise BadInput(f"{path}:{number}: not an event (a name, a timestamp and metadata): {RULE}")
            events.append((index, event))
            found += 1
        if not found:
            raise BadInput(f"{path}: no events: {RULE}")
    return events


def inner(event):
    """The inner "metadata": a JSON string of cxxrun's extras, as a dict."""
    text = event["metadata"].get("metadata")
    try:
        value = json.loads(text) if isinstance(text, str) else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def short_cause(event):
    """A WORKER FAILED event's cause in a few words: the exception and where
    it was raised, a signal, or an exit code."""
    md, extra = event["metadata"], inner(event)
    text = extra.get("cause_detail")
    if not isinstance(text, str) or not text:
        text = ""
        try:
            raw = json.loads(md.get("raw_error") or "null")
        except ValueError:
            raw = md.get("raw_error")
        message = raw.get("message") if isinstance(raw, dict) else raw
        if isinstance(message, dict):  # torch's error file: {"message": {"message": ..., "extraInfo": ...}}
            message = message.get("message")
        if isinstance(message, str):
            text = re.sub(r"^rank \d+ \([^)]*\) ", "", message.strip())
    cause = extra.get("cause")
    if isinstance(cause, str) and text.startswith(cause + ": "):
        text = text[len(cause) + 2:]
    text = re.sub(r"^(a Python traceback on stderr|its error file): ", "", text)
    where = re.search(r"; in its own code at (\S+?):(\d+)", text)
    text = text.split("; ")[0].splitlines()[-1] if text.strip() else ""
    if where:
        text += f" ({os.path.basename(where.group(1))}:{where.group(2)})"
    if not text:
        code, sig = extra.get("exit_code"), extra.get("signal")
        text = f"signal {sig}" if sig else f"exit code {code}" if code is not None else cause or "failed"
    return _short(text)


def _short(text, limit=80):
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _attempt(event):
    value = event["metadata"].get("agent_restarts")
    return value if isinstance(value, int) else 0


def build(events, paths):
    """The timeline the events prove, rows keyed as the module says."""
    several = len(paths) > 1

    def host(event):
        return str(event["metadata"].get("hostname") or "?")

    # Two agents of one host in one file: one local rank started twice in
    # one attempt. Those (file, host) pairs split by group rank.
    started, split = {}, set()
    for index, e in events:
        if e["name"].endswith(".START") and e.get("source") == "WORKER":
            key = (index, host(e), _attempt(e), inner(e).get("local_rank"))
            pids = started.setdefault(key, set())
            pids.add(e["metadata"].get("worker_id"))
            if len(pids) > 1:
                split.add(key[:2])

    rows = {}

    def row_of(index, e):
        key = (index if several else 0, host(e))
        rank = e["metadata"].get("group_rank")
        if (index, host(e)) in split:
            key += (rank,)
        row = rows.setdefault(key, Row(key, host(e)))
        if isinstance(rank, int) and (not row.ranks or row.ranks[-1] != rank):
            row.ranks.append(rank)
        return key

    spans, marks, restarts, attempts = [], [], {}, set()
    times = []
    per_row = {}  # row: [(index, event)] for the fallback
    for index, e in sorted(events, key=lambda ie: ie[1]["timestamp"]):
        name, ts, md, extra = e["name"], float(e["timestamp"]), e["metadata"], inner(e)
        state = name.rsplit(".", 1)[-1]
        key = row_of(index, e)
        per_row.setdefault(key, []).append(e)
        times.append(ts)
        attempt = extra.get("attempt") if isinstance(extra.get("attempt"), int) else _attempt(e)
        if name == "cxxrun.agent.PHASE":
            start, end = extra.get("start_ms"), extra.get("end_ms")
            if isinstance(start, (int, float)) and isinstance(end, (int, float)) and end >= start:
                spans.append(Span(key, str(extra.get("phase", "?")), float(start), float(end), attempt))
                times += [start, end]
                attempts.add(attempt)
        elif name == "cxxrun.agent.GOODPUT":
            if isinstance(extra.get("goodput"), (int, float)):
                rows[key].goodput = float(extra["goodput"])
        elif name == "cxxrun.agent.VERDICT":
            text = f"{extra.get('verdict', '?')}: {extra.get('cause', '?')}"
            if isinstance(extra.get("repeats"), int) and extra["repeats"] > 1:
                text += f" ({extra['repeats']} in a row)"
            marks.append(Mark(key, "verdict", ts, _short(text, 120), attempt))
        elif name == "cxxrun.agent.ATTEMPT_PROGRESS" and isinstance(extra.get("step"), int):
            text = f"step {extra['step']}"
            if isinstance(extra.get("checkpoint_step"), int):
                text += f", checkpoint {extra['checkpoint_step']}"
            marks.append(Mark(key, "progress", ts, text, attempt))
        elif name == "cxxrun.agent.RESTART":
            restarts.setdefault(_attempt(e), ts)
        elif name == "cxxrun.agent.NODE_UNHEALTHY":
            marks.append(Mark(key, "unhealthy", ts, _short(f"node unhealthy: {md.get('raw_error') or '?'}"), attempt))
        elif e.get("source") == "AGENT" and state == "FAILED":
            marks.append(Mark(key, "agent-failed", ts, _short(f"agent failed: {md.get('raw_error') or '?'}"), attempt))
        elif e.get("source") == "WORKER":
            attempts.add(attempt)
            if state == "FAILED":
                marks.append(Mark(key, "failed", ts, f"rank {md.get('global_rank')}: {short_cause(e)}", attempt))
            elif state == "UNHEALTHY":
                marks.append(Mark(key, "hung", ts, _short(f"rank {md.get('global_rank')} hung: "
                                                          f"{extra.get('reason', '?')}"), attempt))

    phased = {s.row for s in spans}
    for key, row_events in per_row.items():
        if key not in phased:
            spans += fallback_spans(key, row_events)
    times += [t for s in spans for t in (s.start_ms, s.end_ms)]

    if several:  # name the file where one host has rows from several
        for row in rows.values():
            if sum(r.host == row.host for r in rows.values()) > 1:
                row.source = os.path.basename(paths[row.key[0]])
    ordered = sorted(rows.values(), key=lambda r: (r.ranks[0] if r.ranks else 1 << 30, r.host, r.key))
    return Timeline(ordered, spans, marks, sorted(restarts.items()), sorted(attempts),
                    min(times), max(times), not (set(rows) - phased))


def fallback_spans(key, events):
    """A row's bars without PHASE events: what the worker, rendezvous and
    attempt events prove, nothing guessed."""
    spans, started, ended, progress = [], {}, {}, {}
    last_restart = None
    for e in events:
        name, ts, state = e["name"], float(e["timestamp"]), e["name"].rsplit(".", 1)[-1]
        if name == "cxxrun.agent.RESTART":
            last_restart = ts
        elif name.endswith(".RENDEZVOUS"):
            duration = e["metadata"].get("duration_ms")
            if isinstance(duration, (int, float)):
                spans.append(Span(key, "rendezvous", ts - duration, ts, _attempt(e)))
            elif last_restart is not None:  # the round after a restart
                spans.append(Span(key, "rendezvous", last_restart, ts, _attempt(e)))
            last_restart = None
        elif name == "cxxrun.agent.ATTEMPT_PROGRESS":
            attempt = inner(e).get("attempt")
            progress[attempt if isinstance(attempt, int) else _attempt(e)] = e
        elif e.get("source") == "WORKER" and state == "START":
            started.setdefault(_attempt(e), ts)
        elif e.get("source") == "WORKER" and state in WORKER_ENDS:
            ended[_attempt(e)] = max(ended.get(_attempt(e), ts), ts)
    last = float(events[-1]["timestamp"])
    for attempt, start in sorted(started.items()):
        end = ended.get(attempt, last)
        extra = inner(progress[attempt]) if attempt in progress else {}
        first = extra.get("first_progress_ms")
        if isinstance(first, (int, float)) and start + first < end:
            spans.append(Span(key, "startup", start, start + first, attempt))
            start += first
        spans.append(Span(key, "running", start, end, attempt))
    return spans


def draw(timeline, output, title=None):
    """The PNG at `output`. ImportError when matplotlib is missing; OSError
    when the file cannot be written."""
    import matplotlib

    matplotlib.use("Agg")  # never a display
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    t0 = timeline.t0_ms
    sec = lambda ms: (ms - t0) / 1000.0  # noqa: E731
    y = {row.key: i for i, row in enumerate(reversed(timeline.rows))}
    row_inches = 1.1 if len(timeline.rows) <= 16 else 0.45  # a large job stays a picture, not a poster
    fig, ax = plt.subplots(figsize=(13, 1.6 + row_inches * len(timeline.rows)), dpi=110)
    seen = []  # the legend's phases: those with a bar wide enough to see
    visible = 0.002 * max(timeline.t1_ms - t0, 1.0)
    for s in timeline.spans:
        colour = COLOURS.get(s.phase, OTHER_COLOUR)
        ax.barh(y[s.row], max(sec(s.end_ms) - sec(s.start_ms), 0.0), left=sec(s.start_ms), height=0.5,
                color=colour, edgecolor="white", linewidth=0.5)
        if s.phase not in seen and s.end_ms - s.start_ms >= visible:
            seen.append(s.phase)
    for n, at in timeline.restarts:
        ax.axvline(sec(at), color="#333333", linestyle="--", linewidth=1)
        ax.annotate(f"restart {n}", (sec(at), 1.0), xycoords=("data", "axes fraction"), fontsize=8,
                    xytext=(2, -10), textcoords="offset points")
    styles = {"failed": ("X", "#b00020", 0.3), "hung": ("v", "#8e44ad", 0.3),
              "unhealthy": ("s", "#e67e22", 0.3), "agent-failed": ("P", "#b00020", 0.3),
              "verdict": ("D", "#000000", -0.3)}
    labelled = set()
    for m in sorted(timeline.marks, key=lambda m: m.at_ms):
        if m.kind == "progress":  # inside the end of the attempt's bar
            ax.annotate(m.text, (sec(m.at_ms), y[m.row]), fontsize=7, color="white", ha="right", va="center",
                        xytext=(-10, 0), textcoords="offset points")
            continue
        marker, colour, dy = styles[m.kind]
        ax.plot(sec(m.at_ms), y[m.row], marker=marker, color=colour, markersize=9, linestyle="none")
        # One label per row, attempt and kind: the first (the root cause).
        if (m.row, m.attempt, m.kind) in labelled:
            continue
        labelled.add((m.row, m.attempt, m.kind))
        more = sum(1 for o in timeline.marks if (o.row, o.attempt, o.kind) == (m.row, m.attempt, m.kind)) - 1
        ax.annotate(m.text + (f" (+{more} more)" if more else ""), (sec(m.at_ms), y[m.row] + dy), fontsize=7,
                    color=colour, xytext=(6, 0), textcoords="offset points", va="center")
    ax.set_yticks(range(len(timeline.rows)))
    ax.set_yticklabels([row.label for row in reversed(timeline.rows)], fontsize=8)
    ax.set_ylim(-0.8, len(timeline.rows) - 0.2)
    span = sec(timeline.t1_ms)
    ax.set_xlim(-0.02 * span - 0.05, span * 1.25 + 0.1)  # room for the last labels
    ax.set_xlabel("seconds from the job's first event")
    ax.grid(axis="x", color="#eeeeee")
    ax.set_axisbelow(True)
    handles = [Patch(color=COLOURS.get(p, OTHER_COLOUR), label=p.replace("_", " ")) for p in seen]
    kinds = {m.kind for m in timeline.marks}
    names = {"failed": "worker failed", "hung": "worker hung", "unhealthy": "node unhealthy",
             "agent-failed": "agent failed", "verdict": "verdict (restart or stop)"}
    handles += [Line2D([], [], marker=styles[k][0], color=styles[k][1], linestyle="none", label=names[k])
                for k in names if k in kinds]
    if timeline.restarts:
        handles.append(Line2D([], [], color="#333333", linestyle="--", label="restart"))
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    where = "" if timeline.from_phases else " (no PHASE events: bars from the workers' own events)"
    ax.set_title((title or "cxxrun job timeline") + where, fontsize=10)
    fig.tight_layout()
    fig.savefig(output, format="png")
    plt.close(fig)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2, as every bad input
        raise BadInput(message)


def main(argv=None):
    parser = _Parser(prog=f"python -m {PROG}", description="Draw a cxxrun job's attempts per node as a PNG.")
    parser.add_argument("events", nargs="+", help="event log(s) written by cxxrun --event-log")
    parser.add_argument("-o", "--output", help="the PNG (default: the first event log's name, .png)")
    parser.add_argument("--title", help="the picture's title")
    try:
        args = parser.parse_args(argv)
        output = args.output or os.path.splitext(args.events[0])[0] + ".png"
        timeline = build(read_events(args.events), args.events)
        try:
            draw(timeline, output, args.title)
        except ImportError as e:
            raise BadInput(f"matplotlib cannot be imported by {sys.executable} ({e}): it draws the PNG "
                           "(apt install python3-matplotlib, or pip install matplotlib)")
        except OSError as e:
            raise BadInput(f"{output}: cannot write it ({e.strerror or e})")
    except BadInput as e:
        print(f"{PROG}: {e}", file=sys.stderr)
        return 2
    source = "phases from PHASE events" if timeline.from_phases else "no PHASE events: bars from worker events"
    print(f"{PROG}: wrote {output}: {len(timeline.rows)} node(s), {len(timeline.attempts)} attempt(s), "
          f"{(timeline.t1_ms - timeline.t0_ms) / 1000:.1f} s ({source})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
