#!/usr/bin/python3
"""bench/etcd.py's recovery plot: each backend's phases against N, and the
medians each panel draws (also from the stderr of earlier runs: --replot)."""
import json
import statistics
import sys


def median(values):
    v = [x for x in values if x is not None]
    return statistics.median(v) if v else None


def draw_recovery(drawn, path, keep_alive, etcd_label=""):
    """Each backend's recovery against N, its two phases stacked: the abort
    event reaching every agent, then the re-join and assignment."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sizes = sorted(drawn)
    etcd_title = f"etcd-v3 (3 members{', ' + etcd_label if etcd_label else ''})"
    panels = [("c10d", "c10d (cxxrun-rdzv)"), ("etcd", etcd_title)]
    if any("baseline" in drawn[n] for n in sizes):
        panels.append(("baseline", etcd_title + ",\nthe --baseline build's generator"))
    fig, axes = plt.subplots(1, len(panels), figsize=(4.5 * len(panels), 4.2), sharey=True)
    for ax, (name, title) in zip(axes, panels):
        labels = [f"{n:,}" for n in sizes]
        push = [(drawn[n].get(name, (None, None))[0] or 0.0) for n in sizes]
        total = [(drawn[n].get(name, (None, None))[1] or 0.0) for n in sizes]
        rejoin = [max(0.0, t - p) for t, p in zip(total, push)]
        ax.bar(labels, push, label="abort event reaches every agent")
        ax.bar(labels, rejoin, bottom=push, label="re-join and assignment")
        for x, n, t in zip(labels, sizes, total):
            failed = drawn[n].get(name, (None, None))[1] is None  # no run finished: say so, not 0 s
            ax.annotate("failed" if failed else f"{t:.2f} s", (x, t), ha="center", va="bottom", fontsize=9)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("simulated agents")
        ax.set_ylabel("seconds (median)")
        ax.legend(loc="upper left", fontsize=8)
    # Room above the tallest bar for the legend, so that no total hides under it.
    top = max([(drawn[n].get(name, (None, None))[1] or 0.0) for n in sizes for name, _ in panels] + [0.1])
    axes[0].set_ylim(0, top * 1.35)
    fig.suptitle(f"One failure -> every agent holds its next assignment (leases renewed every {keep_alive:g} s)",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"plot: {path}", file=sys.stderr)


def medians_to_draw(runs):
    """{panel: (median abort push, median recovery)} of one N's runs ({label:
    [result or None, ...]}), a panel a backend ("c10d", "etcd") and "baseline"
    for the --baseline build's generators, each from its first label: the
    generator listed first (etcd_sim before rdzv_load)."""
    drawn = {}
    for label, results in runs.items():
        panel = "baseline" if label.startswith("etcd (baseline") else label.split(" ")[0]
        if panel not in drawn:
            drawn[panel] = tuple(median([r.get(key) if r else None for r in results])
                                 for key in ("abort_push_s", "recovery_s"))
    return drawn


def recover_logs(paths):
    """{N: {label: [result or None, ...]}} from the '[bench] recover N: ...'
    lines of earlier runs' stderr."""
    got = {}
    for path in paths:
        with open(path) as f:
            for line in f:
                if line.startswith("[bench] recover "):
                    n, runs = line[len("[bench] recover "):].split(":", 1)
                    got[int(n)] = json.loads(runs)
    return got
