#!/usr/bin/python3
"""cxxrun vs torchrun benchmarks: launch time, restart latency, agent peak RSS.

Stdlib only.  Run with /usr/bin/python3 (Debian's python3-torch 1.13 lives
there).  Normally invoked through bench/run.sh, which compiles bench/stamp.c
into a scratch dir and passes --stamp.  See bench/README.md.

Every subprocess has a timeout; a launcher that fails or hangs is reported
(command, exit status, stderr tail) instead of being worked around.
"""
import argparse
import os
import select
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
TORCHRUN_WRAPPER = os.path.join(HERE, "torchrun113.py")
SYS_PYTHON = "/usr/bin/python3"

TARGETS = {"launch": ("ms", 20.0), "restart": ("ms", 20.0), "rss": ("MiB", 10.0)}  # cxxrun's targets


class BenchError(Exception):
    pass


# --------------------------------------------------------------------------
# launchers: each builds argv for one scenario
# --------------------------------------------------------------------------
class Launcher:
    def __init__(self, name, prefix, spell):
        self.name = name
        self.prefix = prefix  # argv prefix (binary or python + wrapper)
        self.spell = spell  # "dash" (cxxrun / torch>=2) or "underscore" (torch 1.13)

    def _opt(self, dashed):
        return dashed if self.spell == "dash" else "--" + dashed[2:].replace("-", "_")

    def argv(self, nproc, max_restarts=None, worker=("true",)):
        a = list(self.prefix) + ["--standalone", f"{self._opt('--nproc-per-node')}={nproc}"]
        if max_restarts is not None:
            a.append(f"{self._opt('--max-restarts')}={max_restarts}")
        if self.spell == "underscore":
            # torch 1.13's default monitor interval is 5 s; use 0.1 s (torch>=2.4 default)
            a.append("--monitor_interval=0.1")
        a.append(self._opt("--no-python"))
        a.extend(worker)
        return a


def make_launchers(args):
    out = []
    if not args.skip_cxxrun:
        out.append(Launcher("cxxrun", [args.cxxrun], "dash"))
    if not args.skip_torchrun:
        out.append(Launcher("torchrun", [SYS_PYTHON, TORCHRUN_WRAPPER], "underscore"))
    return out


# --------------------------------------------------------------------------
# process helpers
# --------------------------------------------------------------------------
def run_env(scratch):
    env = dict(os.environ)
    # torchrun mkdtemp()s a torchelastic_* log dir per run; keep that litter in scratch.
    env["TMPDIR"] = scratch
    # torchrun reads PET_* env defaults; make sure nothing leaks in from the caller.
    for k in list(env):
        if k.startswith("PET_") or k.startswith("TORCHELASTIC_"):
            del env[k]
    return env


def fail(what, argv, rc, errpath):
    tail = ""
    try:
        with open(errpath, "rb") as f:
            data = f.read()
        tail = "\n".join(data.decode(errors="replace").splitlines()[-40:])
    except OSError:
        pass
    raise BenchError(
        f"{what}: command failed (exit status {rc})\n  $ {shlex.join(argv)}\n"
        + "".join(f"  | {l}\n" for l in tail.rstrip().splitlines())
    )


def spawn(argv, scratch, errpath):
    errf = open(errpath, "wb")
    try:
        return subprocess.Popen(
            argv, stdin=subprocess.DEVNULL, stdout=errf, stderr=errf,
            env=run_env(scratch), cwd=scratch, start_new_session=True,
        )
    except OSError as e:
        raise BenchError(f"cannot start launcher: {e}\n  $ {shlex.join(argv)}")
    finally:
        errf.close()


def wait_exit(p, timeout):
    """Popen.wait(timeout) without its polling.

    Popen.wait(timeout=...) polls waitpid(WNOHANG) with an exponential backoff
    (0.5 ms doubling up to 50 ms), which inflates a ~10 ms launch to ~16 ms.
    A pidfd becomes readable the moment the child exits; then reap it.
    """
    try:
        fd = os.pidfd_open(p.pid)
    except (AttributeError, OSError):
        return p.wait(timeout=timeout)  # no pidfd: fall back to polling
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(timeout * 1000):
            raise subprocess.TimeoutExpired(p.args, timeout)
    finally:
        os.close(fd)
    return p.wait()


def wait_bounded(p, timeout, argv, errpath, what):
    try:
        return wait_exit(p, timeout)
    except subprocess.TimeoutExpired:
        kill_group(p)
        fail(f"{what}: TIMEOUT after {timeout}s", argv, "timeout", errpath)


def kill_group(p):
    try:
        os.killpg(p.pid, 9)  # the session we created: launcher + its workers
    except ProcessLookupError:
        pass
    try:
        p.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def reap_group(p):
    """Kill anything the launcher left behind in its session (orphaned workers)."""
    try:
        os.killpg(p.pid, 9)
        return True  # something was still alive
    except ProcessLookupError:
        return False


# --------------------------------------------------------------------------
# benchmarks
# --------------------------------------------------------------------------
def bench_launch(l, runs, scratch, timeout):
    """Whole-process wall time of `<launcher> --standalone --nproc-per-node=8 --no-python true`."""
    argv = l.argv(8, worker=("true",))
    samples = []
    for i in range(runs + 1):  # run 0 = warm-up (page cache), not counted
        errpath = os.path.join(scratch, f"launch.{l.name}.{i}.log")
        t0 = time.perf_counter()
        p = spawn(argv, scratch, errpath)
        rc = wait_bounded(p, timeout, argv, errpath, f"launch/{l.name}")
        dt = time.perf_counter() - t0
        reap_group(p)
        if rc != 0:
            fail(f"launch/{l.name}", argv, rc, errpath)
        if i > 0:
            samples.append(dt * 1e3)
    return {"argv": argv, "unit": "ms", "samples": samples}


def bench_spawn_baseline(runs, scratch):
    """Harness overhead: the same Popen/wait measurement around plain `true`."""
    samples = []
    for i in range(runs + 1):
        errpath = os.path.join(scratch, "baseline.log")
        t0 = time.perf_counter()
        p = spawn(["true"], scratch, errpath)
        wait_exit(p, 10)
        dt = time.perf_counter() - t0
        if i > 0:
            samples.append(dt * 1e3)
    return samples


def read_int(path):
    with open(path) as f:
        return int(f.read().split()[0])


def bench_restart(l, runs, scratch, stamp, timeout, nproc=4):
    """Latency from rank 0's failing exit (attempt 0) to the last attempt-1 worker exec."""
    samples = []
    argv0 = None
    for i in range(runs):
        outdir = tempfile.mkdtemp(prefix=f"restart.{l.name}.{i}.", dir=scratch)
        argv = l.argv(nproc, max_restarts=1, worker=(stamp, "restart", outdir))
        argv0 = argv0 or l.argv(nproc, max_restarts=1, worker=(stamp, "restart", "OUTDIR"))
        errpath = os.path.join(outdir, "launcher.log")
        p = spawn(argv, scratch, errpath)
        rc = wait_bounded(p, timeout, argv, errpath, f"restart/{l.name}")
        leaked = reap_group(p)
        files = set(os.listdir(outdir))
        if "noenv" in files:
            fail(f"restart/{l.name}: worker saw no TORCHELASTIC_RESTART_COUNT/LOCAL_RANK",
                 argv, rc, errpath)
        starts = [f"start.1.{r}" for r in range(nproc)]
        missing = [f for f in ["fail.0"] + starts if f not in files]
        if rc != 0 or missing:
            extra = f" (missing stamp files: {', '.join(missing)})" if missing else ""
            fail(f"restart/{l.name}{extra}", argv, rc, errpath)
        if any(f.startswith("start.2.") for f in files):
            fail(f"restart/{l.name}: more than one restart happened", argv, rc, errpath)
        tf = read_int(os.path.join(outdir, "fail.0"))
        ts = [read_int(os.path.join(outdir, f)) for f in starts]
        samples.append((max(ts) - tf) / 1e6)
        if leaked:
            print(f"  note: restart/{l.name} run {i}: processes left in the launcher's "
                  "session after it exited (killed)", file=sys.stderr)
    return {"argv": argv0, "unit": "ms", "samples": samples}


def proc_hwm_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None  # gone, or a zombie (no mm -> no VmHWM line)


def bench_rss(l, runs, scratch, stamp, timeout, nproc=8):
    """Peak RSS (VmHWM) of the launcher process itself, 8 workers sleeping 1 s."""
    samples = []
    argv0 = None
    notes = []
    for i in range(runs):
        outdir = tempfile.mkdtemp(prefix=f"rss.{l.name}.{i}.", dir=scratch)
        argv = l.argv(nproc, worker=(stamp, "rss", outdir))
        argv0 = argv0 or l.argv(nproc, worker=(stamp, "rss", "OUTDIR"))
        errpath = os.path.join(outdir, "launcher.log")
        p = spawn(argv, scratch, errpath)
        # Poll the launcher's VmHWM (monotonic) until it exits: the last value
        # read while it still had an address space is its peak so far.
        polled = 0
        deadline = time.monotonic() + timeout
        while p.poll() is None:
            v = proc_hwm_kb(p.pid)
            if v is not None:
                polled = max(polled, v)
            if time.monotonic() > deadline:
                kill_group(p)
                fail(f"rss/{l.name}: TIMEOUT after {timeout}s", argv, "timeout", errpath)
            time.sleep(0.005)
        rc = p.returncode
        reap_group(p)
        if rc != 0:
            fail(f"rss/{l.name}", argv, rc, errpath)
        # Cross-check: local rank 0 read /proc/<its parent>/status just before exiting.
        worker_kb = 0
        rssf = os.path.join(outdir, "rss.0")
        if os.path.exists(rssf):
            with open(rssf) as f:
                ppid, hwm, _ = (int(x) for x in f.read().split())
            if ppid == p.pid:
                worker_kb = hwm
            else:
                notes.append(f"worker's parent pid {ppid} != launcher pid {p.pid}; "
                             "using the driver's samples only")
        else:
            notes.append("worker rss.0 file missing")
        kb = max(polled, worker_kb)
        if kb <= 0:
            fail(f"rss/{l.name}: could not read VmHWM of the launcher", argv, rc, errpath)
        samples.append(kb / 1024.0)
    return {"argv": argv0, "unit": "MiB", "samples": samples, "notes": sorted(set(notes))}


# --------------------------------------------------------------------------
# reporting
# --------------------------------------------------------------------------
def cpu_busy(seconds=1.0):
    """Fraction of all CPU time that was busy (not idle/iowait) over `seconds`."""
    def snap():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        return sum(v), v[3] + v[4]
    t0, i0 = snap()
    time.sleep(seconds)
    t1, i1 = snap()
    return 1.0 - (i1 - i0) / max(1, t1 - t0)


def fmt(v, unit):
    if v is None:
        return "n/a"
    if unit == "ms" and v >= 1000:
        return f"{v / 1000:.2f} s"
    if unit == "ms":
        return f"{v:.1f} ms" if v >= 10 else f"{v:.2f} ms"
    return f"{v:.1f} {unit}"


def summarize(res, key):
    s = res.get("samples") or []
    if not s:
        return None
    return {"median": statistics.median(s), "min": min(s), "max": max(s), "n": len(s)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cxxrun", default=os.path.join(ROOT, "build", "bin", "cxxrun"))
    ap.add_argument("--stamp", required=True, help="compiled bench/stamp.c")
    ap.add_argument("--runs", type=int, default=10, help="cxxrun runs per benchmark")
    ap.add_argument("--torchrun-runs", type=int, default=5, help="torchrun runs per benchmark")
    ap.add_argument("--rss-runs", type=int, default=3, help="runs of the RSS benchmark (each ~1-3 s)")
    ap.add_argument("--only", choices=["launch", "restart", "rss"], action="append",
                    help="run only these benchmarks (repeatable)")
    ap.add_argument("--skip-cxxrun", action="store_true")
    ap.add_argument("--skip-torchrun", action="store_true")
    ap.add_argument("--timeout", type=float, default=60.0, help="per-subprocess timeout (s)")
    ap.add_argument("--keep-scratch", action="store_true")
    ap.add_argument("--no-snapshot", action="store_true",
                    help="run --cxxrun in place instead of a copy taken at start "
                         "(the copy keeps a concurrent rebuild from swapping the binary mid-run)")
    ap.add_argument("--wait-idle", type=float, default=0.0, metavar="SECONDS",
                    help="first wait up to SECONDS for the machine to be <10%% busy")
    args = ap.parse_args()

    which = args.only or ["launch", "restart", "rss"]
    launchers = make_launchers(args)
    if not launchers:
        ap.error("nothing to run")
    for l in launchers:
        if l.name == "cxxrun" and not os.access(args.cxxrun, os.X_OK):
            print(f"error: cxxrun binary not found/executable at {args.cxxrun} "
                  "(build it, pass --cxxrun, or use --skip-cxxrun)", file=sys.stderr)
            return 2

    deadline = time.monotonic() + args.wait_idle
    busy_before = cpu_busy()
    while busy_before >= 0.10 and time.monotonic() < deadline:
        print(f"[bench] machine {busy_before:.0%} busy; waiting for it to go idle ...",
              file=sys.stderr, flush=True)
        time.sleep(5)
        busy_before = cpu_busy(2.0)
    if busy_before > 0.15:
        print(f"[bench] WARNING: machine is {busy_before:.0%} busy before the run "
              "(other processes compete for the CPUs; results will be noisy)",
              file=sys.stderr, flush=True)
    scratch = tempfile.mkdtemp(prefix="cxxrun-bench.")
    shown_cxxrun = args.cxxrun
    if not args.no_snapshot and any(l.name == "cxxrun" for l in launchers):
        snap = os.path.join(scratch, "cxxrun")
        shutil.copy2(args.cxxrun, snap)
        for l in launchers:
            if l.name == "cxxrun":
                l.prefix = [snap]
    version = None
    for l in launchers:
        if l.name == "cxxrun":
            try:
                v = subprocess.run(l.prefix + ["--version"], capture_output=True,
                                   timeout=10, text=True)
                out = (v.stdout or v.stderr).strip()
                version = out.splitlines()[0] if out else f"exit status {v.returncode}"
            except (subprocess.TimeoutExpired, OSError) as e:
                version = f"failed: {e}"
    results = {}  # (bench, launcher) -> result dict or error string
    baseline = None
    try:
        for b in which:
            for l in launchers:
                n = args.runs if l.name == "cxxrun" else args.torchrun_runs
                if b == "rss":
                    n = args.rss_runs
                print(f"[bench] {b:8s} {l.name:9s} x{n} ...", file=sys.stderr, flush=True)
                t0 = time.monotonic()
                try:
                    if b == "launch":
                        r = bench_launch(l, n, scratch, args.timeout)
                    elif b == "restart":
                        r = bench_restart(l, n, scratch, args.stamp, args.timeout)
                    else:
                        r = bench_rss(l, n, scratch, args.stamp, args.timeout)
                    s = summarize(r, b)
                    print(f"[bench]   median {fmt(s['median'], r['unit'])}, "
                          f"min {fmt(s['min'], r['unit'])} "
                          f"({time.monotonic() - t0:.1f} s)", file=sys.stderr, flush=True)
                    print("[bench]   samples: " + ", ".join(
                        fmt(v, r["unit"]) for v in r["samples"]), file=sys.stderr, flush=True)
                    for note in r.get("notes", []):
                        print(f"[bench]   note: {note}", file=sys.stderr)
                except BenchError as e:
                    r = {"error": str(e)}
                    print(f"[bench]   FAILED:\n{e}", file=sys.stderr, flush=True)
                results[(b, l.name)] = r
            if b == "launch":
                baseline = bench_spawn_baseline(args.runs, scratch)
    finally:
        if args.keep_scratch:
            print(f"[bench] scratch kept at {scratch}", file=sys.stderr)
        else:
            shutil.rmtree(scratch, ignore_errors=True)

    busy_after = cpu_busy()

    # ---------------- markdown report ----------------
    titles = {
        "launch": "launch: `--standalone --nproc-per-node=8 --no-python true`, wall time",
        "restart": "restart: rank-0 exit → last of 4 replacement workers exec'd (`--max-restarts=1`)",
        "rss": "launcher peak RSS (VmHWM), 8 workers sleeping 1 s",
    }
    names = [l.name for l in launchers]
    print()
    hdr = "| benchmark | stat |" + "".join(f" {n} |" for n in names)
    sep = "|---|---|" + "---:|" * len(names)
    both = "cxxrun" in names and "torchrun" in names
    if both:
        hdr += " torchrun / cxxrun | cxxrun target |"
        sep += "---:|---|"
    print(hdr)
    print(sep)
    errors = []
    for b in which:
        unit, target = TARGETS[b]
        stats = ["median", "min"] if b != "rss" else ["max", "median"]
        for st in stats:
            row = f"| {titles[b] if st == stats[0] else ''} | {st} |"
            vals = {}
            for n in names:
                r = results.get((b, n), {})
                if "error" in r:
                    row += " FAILED |"
                    if st == stats[0]:
                        errors.append(r["error"])
                    continue
                s = summarize(r, b)
                vals[n] = s[st] if s else None
                row += f" {fmt(vals[n], unit)} |"
            if both:
                c, t = vals.get("cxxrun"), vals.get("torchrun")
                ratio = f"{t / c:.0f}×" if c and t and t / c >= 10 else (
                    f"{t / c:.1f}×" if c and t else "n/a")
                ok = ""
                if c is not None:
                    ok = f"≤ {target:g} {unit}: {'met' if c <= target else 'NOT met'}"
                row += f" {ratio} | {ok if st == stats[0] else ''} |"
            print(row)
    print()
    ns = {n: {b: len(results.get((b, n), {}).get("samples", []) or []) for b in which}
          for n in names}
    print("Runs per cell: " + "; ".join(
        f"{n}: " + ", ".join(f"{b} {ns[n][b]}" for b in which) for n in names) + ".")
    if baseline:
        print(f"Harness overhead (same Popen/wait timing around plain `true`): "
              f"median {fmt(statistics.median(baseline), 'ms')}, min {fmt(min(baseline), 'ms')} "
              "(included in the launch numbers).")
    print(f"Other load: machine {busy_before:.0%} busy in the 1 s before the run, "
          f"{busy_after:.0%} in the 1 s after; {os.cpu_count()} CPUs.")
    if version:
        shown = os.path.abspath(args.cxxrun)  # relative to the repo: no path of this machine in results
        print(f"cxxrun: `{os.path.relpath(shown, ROOT) if shown.startswith(ROOT + '/') else shown}` "
              f"(`--version`: {version}).")
    print()
    print("Commands (OUTDIR = a fresh scratch dir per run; STAMP = compiled bench/stamp.c):")
    print()
    for b in which:
        for n in names:
            r = results.get((b, n), {})
            argv = r.get("argv")
            if argv:
                shown = [("STAMP" if a == args.stamp else
                          shown_cxxrun if a == os.path.join(scratch, "cxxrun") else
                          a) for a in argv]
                shown = [(os.path.relpath(a, ROOT) if a.startswith(ROOT + "/") else a)
                         for a in shown]
                print(f"- {b}/{n}: `{shlex.join(shown)}`")
    if errors:
        print()
        print("Failures:")
        for e in errors:
            print()
            print("```")
            print(e.rstrip())
            print("```")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
