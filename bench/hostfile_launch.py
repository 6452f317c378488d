"""One command for every host against an ssh loop (bench/RESULTS.md, "One
command for every host"): three hosts as network namespaces with a real sshd
each (tests/integration/netns_hosts.py), and the time from the command's
start to every worker running (each worker writes its clock when it starts),
for `cxxrun --hostfile` and for examples/multinode/ssh_fanout.sh, which
ssh-es a `cxxrun` to each host. Runs alternate; root.

    python3 bench/hostfile_launch.py --cxxrun build/bin/cxxrun --runs 10
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
import netns_hosts  # noqa: E402

LOOP = os.path.join(HERE, "..", "examples", "multinode", "ssh_fanout.sh")

# ssh_fanout.sh runs `cxxrun` from the remote PATH; this ssh puts the build's
# directory first on it, and the test's keys and options on the ssh.
SSH_WRAPPER = """#!/bin/bash
exec {rsh} "${{@:1:$#-1}}" "PATH={bin}:\\$PATH; ${{!#}}"
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxxrun", required=True)
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--nproc-per-node", type=int, default=2)
    args = ap.parse_args()
    why = netns_hosts.missing()
    if why:
        raise SystemExit(f"hostfile_launch: {why}")
    cxxrun = os.path.abspath(args.cxxrun)
    with tempfile.TemporaryDirectory(prefix="cxxrun_bench_") as d:
        os.chmod(d, 0o755)
        hosts = netns_hosts.Hosts(d)
        try:
            worker = os.path.join(d, "worker.sh")
            with open(worker, "w") as f:
                f.write(f"#!/bin/sh\ndate +%s.%N > {d}/out/ts.$RANK\n")
            os.chmod(worker, 0o755)
            hostfile = os.path.join(d, "hostfile")
            with open(hostfile, "w") as f:
                f.write("".join(f"{ip} slots={args.nproc_per_node}\n" for ip in hosts.ips))
            ssh = os.path.join(d, "ssh")
            with open(ssh, "w") as f:
                f.write(SSH_WRAPPER.format(rsh=hosts.rsh, bin=os.path.dirname(cxxrun)))
            os.chmod(ssh, 0o755)
            world = 3 * args.nproc_per_node
            loop = hosts.in_launcher_ns(["bash", LOOP, ",".join(hosts.ips),
                                         f"--nproc-per-node={args.nproc_per_node}", "--no-python", worker])
            # The loop asks the first host for its address first (one more
            # ssh); RDZV_HOST spares it that.
            commands = {
                "cxxrun --hostfile": (hosts.in_launcher_ns(
                    [cxxrun, f"--hostfile={hostfile}", f"--rsh={hosts.rsh}", "--no-python", worker]), {}),
                "ssh loop (ssh_fanout.sh)": (loop, {}),
                "ssh loop, RDZV_HOST given": (loop, {"RDZV_HOST": hosts.ips[0]}),
            }
            times = {name: [] for name in commands}
            for run in range(args.runs):
                for name, (argv, extra) in commands.items():
                    env = dict(os.environ, SSH=ssh, **extra)
                    out = os.path.join(d, "out")
                    subprocess.run(["rm", "-rf", out])
                    os.makedirs(out)
                    os.chmod(out, 0o777)
                    start = time.time()
                    p = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120,
                                       stdin=subprocess.DEVNULL)
                    if p.returncode != 0:
                        raise SystemExit(f"{name} failed ({p.returncode}):\n{p.stderr[-3000:]}")
                    stamps = []
                    for r in range(world):
                        with open(os.path.join(out, f"ts.{r}")) as f:
                            stamps.append(float(f.read()))
                    times[name].append(max(stamps) - start)
                    print(f"run {run}: {name}: {times[name][-1]:.3f} s", flush=True)
                    # The first host's store port, free again before the next job.
                    time.sleep(0.5)
            print()
            print("| command | runs | median | min | max |")
            print("|---|---:|---:|---:|---:|")
            for name, ts in times.items():
                print(f"| {name} | {len(ts)} | {statistics.median(ts):.3f} s | {min(ts):.3f} s | {max(ts):.3f} s |")
            one, *loops = (statistics.median(ts) for ts in times.values())
            for name, m in zip(list(times)[1:], loops):
                print(f"ratio ({name} / cxxrun --hostfile), medians: {m / one:.2f}")
        finally:
            hosts.close()


if __name__ == "__main__":
    main()
